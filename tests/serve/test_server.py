"""``cn3 serve`` over HTTP: what a request can reach (a fixed list of files, never a path), headers,
JSON escaping of hostile text, the body cap, binding, and that no served file names another origin."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

STATIC_DIR = Path(__file__).resolve().parents[2] / "cn3" / "serve" / "static"
HOSTILE = "<script>alert(1)</script> \"double\" 'single' </p><!-- & شكرا שלום \u202eevil\u202c \u2028line"


def fetch(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """``(status, headers, body)`` of one request, errors included."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


JSON = {"Content-Type": "application/json"}


def post_json(base: str, route: str, body: dict) -> tuple[int, dict, bytes]:
    return fetch(base + route.lstrip("/"), json.dumps(body).encode(), {"Content-Type": "application/json"})


# ---- no server needed -------------------------------------------------------------------------------


#: XML namespace names: identifiers that look like URLs (``createElementNS``, ``xmlns``), never fetched
NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml", "http://www.w3.org/1999/xlink",
              "http://www.w3.org/2000/xmlns/")


def external_urls(text: str, suffix: str) -> list[str]:
    """``http://``/``https://`` and protocol-relative (``//host``) URLs outside comments of a page file
    (XML namespace names, :data:`NAMESPACES`, excepted)."""
    for namespace in NAMESPACES:
        text = re.sub(re.escape(namespace) + r"(?=[\s\"'`])", "", text)
    if suffix in (".js", ".css"):
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    if suffix == ".js":
        text = re.sub(r"(?<![:\\\w\"'`])//.*", "", text)  # line comments, not the // of a URL
    if suffix == ".html":
        text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    absolute = re.findall(r"https?://[^\s\"'`)<>]*", text, flags=re.I)
    relative = re.findall(r"""(?:src|href|url)\s*[=(]\s*["']?\s*(//[^\s"')]+)""", text, flags=re.I)
    return absolute + relative


def test_the_url_check_finds_what_it_should():
    assert external_urls('<script src="https://cdn.example.org/d3.js"></script>', ".html")
    assert external_urls('<link href="//fonts.example.com/x.css">', ".html")
    assert external_urls("@import url(//cdn.example.com/a.css);", ".css")
    assert external_urls('fetch("http://evil.example/x") // a comment', ".js")
    assert not external_urls("// see https://example.org for the idea\nconst a = 1; /* http://x */", ".js")
    assert not external_urls('<!-- https://example.org --><a href="/static/app.js">', ".html")
    assert not external_urls("const u = new URL('api/runs', location.href);", ".js")
    assert not external_urls('document.createElementNS("http://www.w3.org/2000/svg", "svg")', ".js")
    assert external_urls('fetch("http://www.w3.org/2000/svg/evil.js")', ".js")


def test_no_served_file_names_another_origin():
    from cn3.serve.server import STATIC

    shipped = [STATIC_DIR / name for name in STATIC if (STATIC_DIR / name).is_file()]
    if not shipped:
        pytest.skip(f"the page's files are not in {STATIC_DIR} yet")
    for path in shipped:
        found = external_urls(path.read_text(encoding="utf-8"), path.suffix)
        assert not found, f"{path.name} names another origin: {found}"


def test_json_escapes_markup_and_line_separators():
    from cn3.serve.server import json_bytes

    raw = json_bytes({"text": HOSTILE})
    assert not set(b"<>&") & set(raw) and b"\xe2\x80\xa8" not in raw
    assert json.loads(raw) == {"text": HOSTILE}


def test_binds_127_0_0_1_by_default():
    import inspect

    from cli.serve import serve_command
    from cn3.serve.api import ServeApp
    from cn3.serve.server import make_server

    assert inspect.signature(make_server).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(serve_command).parameters["host"].default.default == "127.0.0.1"
    server = make_server(ServeApp([]), port=0, quiet=True)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1" and port > 0 and server.url == f"http://127.0.0.1:{port}/"
    finally:
        server.server_close()


def test_an_empty_server_answers_without_runs():
    from cn3.serve.api import ServeApp
    from cn3.serve.server import make_server, serve_in_thread

    server = make_server(ServeApp([]), port=0, quiet=True)
    thread = serve_in_thread(server)
    try:
        status, headers, body = fetch(server.url + "api/runs")
        assert status == 200 and json.loads(body) == {"runs": [], "max_words": 120, "grid": None}
        assert headers["Content-Type"] == "application/json; charset=utf-8"
        status, _, body = fetch(server.url + "static/../api.py")
        assert status == 404 and json.loads(body) == {"error": "no such file"}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---- against the live server of the session's runs (slow: they train first) ----------------------


@pytest.mark.slow
def test_static_files_by_name_only(live_server):
    from cn3.serve.server import STATIC

    for name, content_type in STATIC.items():
        status, headers, body = fetch(live_server + f"static/{name}")
        if (STATIC_DIR / name).is_file():
            assert status == 200 and headers["Content-Type"] == content_type
            assert body == (STATIC_DIR / name).read_bytes()
        else:
            assert status == 404
    status, _, body = fetch(live_server)
    assert (status, body) == ((200, (STATIC_DIR / "index.html").read_bytes()) if (STATIC_DIR / "index.html").is_file()
                              else (404, b'{"error":"no such file"}'))


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    "static/../server.py", "static/%2e%2e/server.py", "static/..%2fserver.py", "static/..%5cserver.py",
    "static/server.py", "static/__init__.py", "static/", "static", "static//etc/passwd", "static/%2fetc%2fpasswd",
    "../../../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "static/index.html/..", "static/INDEX.HTML",
    "static/index.html%00.py", "api/grid/image?name=../../etc/passwd", "api/grid/image?name=/etc/passwd",
    "cn3/serve/server.py", "etc/passwd", "api/runs/../../server.py",
])
def test_no_request_names_a_file(live_server, path):
    status, headers, body = fetch(live_server + path)
    assert status == 404, body
    assert "error" in json.loads(body) and b"import" not in body and b"root:" not in body
    assert headers["Content-Type"] == "application/json; charset=utf-8"


@pytest.mark.slow
def test_every_answer_carries_the_security_headers(live_server):
    for url, data in ((live_server + "api/runs", None), (live_server + "nothing", None),
                      (live_server + "api/view", b"{}"), (live_server + "api/view", b"{" * 100)):
        _, headers, _ = fetch(url, data)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "default-src 'self'" in headers["Content-Security-Policy"]
        assert "script-src 'self'" in headers["Content-Security-Policy"]


@pytest.mark.slow
def test_hostile_text_comes_back_as_data(live_server, serve_ids):
    status, headers, raw = post_json(live_server, "api/view",
                                     {"run": serve_ids["trec"], "text": HOSTILE, "pretokenized": True})
    assert status == 200 and headers["Content-Type"] == "application/json; charset=utf-8"
    assert not set(b"<>&") & set(raw)  # no markup can reach a page that mishandles the JSON
    assert json.loads(raw)["sides"][0]["tokens"] == HOSTILE.split()
    status, _, raw = post_json(live_server, "api/view", {"run": "<img src=x onerror=alert(1)>", "text": "a"})
    assert status == 404 and b"<img" not in raw and "<img" in json.loads(raw)["error"]


@pytest.mark.slow
def test_caps_and_bad_requests_over_http(live_server, serve_ids):
    status, _, raw = post_json(live_server, "api/view", {"run": serve_ids["trec"], "text": "w " * 121})
    assert status == 413 and "120" in json.loads(raw)["error"]
    status, _, raw = fetch(live_server + "api/view", b"x" * (64 * 1024 + 1), JSON)
    assert status == 413 and "64 KB" in json.loads(raw)["error"]
    status, _, raw = fetch(live_server + "api/view", b"[1]", JSON)
    assert status == 400 and json.loads(raw) == {"error": "the request body must be a JSON object"}
    status, _, raw = fetch(live_server + "api/view", b"{}", {**JSON, "Content-Length": "many"})
    assert status == 400 and "Content-Length" in json.loads(raw)["error"]
    assert fetch(live_server + "api/runs")[0] == 200  # the server still answers


@pytest.mark.slow
def test_concurrent_requests_get_the_same_answer(live_server, serve_ids):
    """One model, several threads: the lock serialises them, every answer is whole and the same."""
    answers: list = []

    def ask(run: str) -> None:
        answers.append((run, post_json(live_server, "api/view", {"run": run, "text": "Who wrote Hamlet ?"})))

    runs = [serve_ids["trec"], serve_ids["trec_transformer"]] * 3
    threads = [threading.Thread(target=ask, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == len(runs) and all(status == 200 for _, (status, _, _) in answers)
    for run in set(runs):
        bodies = {body for r, (_, _, body) in answers if r == run}
        assert len(bodies) == 1
