"""``cn3 serve``'s HTTP side on raw sockets, without runs (fast): HEAD, chunked bodies, keep-alive, the
Host and origin checks, methods, JSON with the security headers on every answer (waitress's own
parser errors included), and a client that goes away leaving no traceback."""

from __future__ import annotations

import json
import socket
import time

import pytest

from cn3.serve.api import MAX_BODY, ServeApp
from cn3.serve.server import make_server, serve_in_thread


@pytest.fixture(scope="module")
def server():
    """An empty server (no runs) on a free port of 127.0.0.1."""
    server = make_server(ServeApp([]), port=0, quiet=True)
    thread = serve_in_thread(server)
    yield server
    server.shutdown()
    thread.join(5)


def exchange(server, data: bytes, timeout: float = 10.0, reset_ok: bool = False) -> bytes:
    """Send ``data`` on a fresh connection, half-close it, and read until the server closes.
    ``reset_ok``: the server may reset the connection after its answer (it closes without reading
    the rest of a request it refused, as HTTP allows)."""
    chunks = []
    with socket.create_connection(server.server_address, timeout=timeout) as sock:
        sock.sendall(data)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # ENOTCONN: the reset came before the half-close; its answer is still read below
            if not reset_ok:
                raise
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            if not reset_ok:
                raise
    return b"".join(chunks)


def responses(raw: bytes) -> list[tuple[int, dict, bytes]]:
    """The HTTP/1.x responses in ``raw``, in order: ``(status, headers lower-cased, body)``."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        out.append((status, headers, rest[:length]))
        raw = rest[length:]
    return out


def request(method: str, path: str, host: str = "127.0.0.1", body: bytes = b"", headers: dict | None = None,
            close: bool = True) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    if body and "Transfer-Encoding" not in (headers or {}):
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def assert_json_answer(answer: tuple[int, dict, bytes], status: int, *fragments: str) -> dict:
    code, headers, body = answer
    assert code == status, (code, body)
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert "default-src 'self'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"
    value = json.loads(body)
    for fragment in fragments:
        assert fragment in value["error"], value
    return value


JSON = {"Content-Type": "application/json"}


def test_get_and_head(server):
    (get,) = responses(exchange(server, request("GET", "/api/runs")))
    assert get[0] == 200 and json.loads(get[2]) == {"runs": [], "max_words": 120, "grid": None}
    raw = exchange(server, request("HEAD", "/api/runs"))
    (status, headers, body) = responses(raw)[0]
    assert status == 200 and body == b"" and raw.endswith(b"\r\n\r\n")
    assert int(headers["content-length"]) == len(get[2])
    (status, headers, body) = responses(exchange(server, request("HEAD", "/")))[0]
    assert status == 200 and headers["content-type"].startswith("text/html") and body == b""


def test_keep_alive_answers_requests_in_order(server):
    data = request("GET", "/api/runs", close=False) + request("GET", "/nothing", close=False) + \
        request("GET", "/api/runs")
    answers = responses(exchange(server, data))
    assert [a[0] for a in answers] == [200, 404, 200]


def test_a_chunked_body_is_read_as_the_body(server):
    """A request hidden in a chunked body is part of the body (here: not JSON), never a request of its own."""
    hidden = b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    chunked = f"{len(hidden):x}\r\n".encode() + hidden + b"\r\n0\r\n\r\n"
    raw = exchange(server, request("POST", "/api/view", body=chunked,
                                   headers={**JSON, "Transfer-Encoding": "chunked"}))
    (answer,) = responses(raw)
    assert_json_answer(answer, 400, "not valid UTF-8 JSON")
    body = b'{"run": "r7", "text": "a b"}'
    chunked = b"".join(f"{len(body[i:i + 5]):x}\r\n".encode() + body[i:i + 5] + b"\r\n" for i in range(0, len(body), 5))
    (answer,) = responses(exchange(server, request("POST", "/api/view", body=chunked + b"0\r\n\r\n",
                                                   headers={**JSON, "Transfer-Encoding": "chunked"})))
    assert_json_answer(answer, 404, "unknown run 'r7'")


@pytest.mark.parametrize(("host", "status"), [("127.0.0.1", 200), ("127.0.0.1:8008", 200), ("localhost", 200),
                                              ("LOCALHOST:1", 200), ("[::1]:80", 200), ("evil.example", 421),
                                              ("evil.example:8008", 421), ("127.0.0.1.evil.example", 421),
                                              ("localhost.", 421), ("", 421)])
def test_host_names_the_server(server, host, status):
    (answer,) = responses(exchange(server, request("GET", "/api/runs", host=host)))
    if status == 200:
        assert answer[0] == 200
    else:
        assert_json_answer(answer, 421, "--host")


def test_host_widens_with_the_bound_address():
    from cn3.serve.server import WsgiApp, allowed_hosts

    assert allowed_hosts("0.0.0.0") is None and allowed_hosts("::") is None
    assert allowed_hosts("192.168.1.5") == {"127.0.0.1", "localhost", "::1", "192.168.1.5"}
    app = WsgiApp(ServeApp([]), "192.168.1.5", quiet=True)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/api/runs", "HTTP_HOST": "192.168.1.5:8008"}
    assert app.respond(environ, "GET")[0] == 200
    assert app.respond({**environ, "HTTP_HOST": "other:8008"}, "GET")[0] == 421
    assert WsgiApp(ServeApp([]), "0.0.0.0", quiet=True).respond({**environ, "HTTP_HOST": "any.name"}, "GET")[0] == 200


@pytest.mark.parametrize(("headers", "status", "fragment"), [
    ({"Content-Type": "text/plain"}, 415, "application/json"),
    ({}, 415, "application/json"),
    ({**JSON, "Origin": "http://evil.example"}, 403, "another site"),
    ({**JSON, "Origin": "null"}, 403, "another site"),
    ({**JSON, "Sec-Fetch-Site": "cross-site"}, 403, "another site"),
    ({**JSON, "Sec-Fetch-Site": "same-site"}, 403, "another site"),
    ({**JSON, "Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}, 404, "unknown run"),
    ({**JSON}, 404, "unknown run"),
])
def test_a_cross_origin_post_is_refused(server, headers, status, fragment):
    body = b'{"run": "r0", "text": "hello"}'
    (answer,) = responses(exchange(server, request("POST", "/api/view", body=body, headers=headers)))
    assert_json_answer(answer, status, fragment)


@pytest.mark.parametrize("method", ["PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "FOO"])
def test_other_methods_are_405(server, method):
    (answer,) = responses(exchange(server, request(method, "/api/runs")))
    assert_json_answer(answer, 405, "GET, HEAD or POST")
    assert answer[1]["allow"] == "GET, HEAD, POST"


@pytest.mark.parametrize(("data", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: many\r\n\r\n", 400),
    (b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n", 400),
    (b"POST /api/view HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
     + str(MAX_BODY + 1).encode() + b"\r\n\r\n", 413),  # refused on its headers, before the body
    (b"POST /api/view HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", 400),
    (b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"y" * 17_000 + b"\r\n\r\n", 431),
])
def test_the_parsers_own_errors_are_json_with_the_headers(server, data, status):
    answers = responses(exchange(server, data, reset_ok=status == 431))
    assert_json_answer(answers[0], status)


def test_a_truncated_request_or_a_client_that_leaves_costs_nothing(server, capfd):
    for partial in (b"GET /api/ru", b"POST /api/view HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                    b"\r\nContent-Length: 100\r\n\r\n{\"run\":", b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
        with socket.create_connection(server.server_address, timeout=5) as sock:
            sock.sendall(partial)  # and goes away
    for _ in range(20):  # asks, then leaves before reading the answer
        with socket.create_connection(server.server_address, timeout=5) as sock:
            sock.sendall(request("GET", "/static/app.js", close=False))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
    time.sleep(0.5)
    (answer,) = responses(exchange(server, request("GET", "/api/runs")))
    assert answer[0] == 200
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "BrokenPipe" not in captured.err


def test_the_port_is_taken_before_anything_loads():
    """A taken port fails in make_server (cn3 serve binds before loading its models)."""
    first = make_server(ServeApp([]), port=0, quiet=True)
    try:
        with pytest.raises(OSError):
            make_server(ServeApp([]), port=first.server_address[1], quiet=True)
    finally:
        first.server_close()
