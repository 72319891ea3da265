"""The HTTP side of ``cn3 serve``: a WSGI application over :class:`cn3.serve.api.ServeApp`, served by
waitress (docs/design.md says why a maintained server: chunked bodies, HEAD, keep-alive, a listen
backlog, clients that go away are its work, not ours).

What a request can reach: the API, the page's files by a fixed list of names (:data:`STATIC`, read
from the package, never a path from the URL) and the grid's PNGs by their names in its report.

Who may ask: a request whose ``Host`` names an address this server answers to (:func:`allowed_hosts`:
the localhost names and the bound address; any name when bound to every interface), so a page on
another site that makes its own name resolve to 127.0.0.1 (DNS rebinding) is refused (421); a POST
must carry ``Content-Type: application/json`` (415 otherwise: a cross-origin page cannot send that
without a preflight this server never grants) and, when the browser says where it comes from
(``Origin``, ``Sec-Fetch-Site``), come from this origin (403).

Every answer, errors of waitress's own parser included (:class:`JsonErrorTask`), is JSON or a page
file and carries :data:`SECURITY_HEADERS` (a Content-Security-Policy allowing this origin only).
JSON escapes ``<``, ``>`` and ``&`` (``\\u003c`` ...), so typed text comes back as data, never markup.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from importlib import resources
from urllib.parse import parse_qs

from cn3.serve.api import MAX_BODY, ApiError, ServeApp

#: the page's files: name -> content type (served from ``cn3/serve/static/``)
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}
#: hosts that keep the server on this machine
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: bind addresses that listen on every interface: any Host name is accepted
ANY_HOST = ("0.0.0.0", "::")
#: worker threads answering requests (the models themselves take one request at a time each)
THREADS = 8
#: connections waiting to be accepted (the kernel's listen queue)
BACKLOG = 1024
#: the largest request head (request line and headers) read
MAX_HEADER = 16 * 1024
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
                                "base-uri 'none'; frame-ancestors 'none'; form-action 'none'"),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin",
}
JSON_TYPE = "application/json; charset=utf-8"


def json_bytes(value: dict) -> bytes:
    """UTF-8 JSON with ``<``, ``>``, ``&`` and the JavaScript line separators escaped."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode("utf-8", errors="backslashreplace")


def static_file(name: str) -> bytes | None:
    """The bytes of the page's file ``name`` when it is in :data:`STATIC` and shipped, else ``None``."""
    if name not in STATIC:
        return None
    resource = resources.files("cn3.serve").joinpath("static", name)
    return resource.read_bytes() if resource.is_file() else None


def allowed_hosts(host: str) -> frozenset[str] | None:
    """The ``Host`` names (port left off, lower case) a server bound to ``host`` answers: the localhost
    names and ``host`` itself; ``None`` (any) for an address of every interface (``0.0.0.0``, ``::``)."""
    if host in ANY_HOST:
        return None
    return frozenset({*LOCAL_HOSTS, host.lower().strip("[]")})


def host_name(header: str) -> str:
    """The name of a ``Host`` header without its port: ``[::1]:8008`` -> ``::1``, ``a:80`` -> ``a``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    name, _, _ = header.partition(":") if header.count(":") == 1 else (header, "", "")
    return name


class WsgiApp:
    """The WSGI application: checks who asks (module docstring), then routes to the API, a page file or
    a grid image. Never raises: anything unexpected is the API's 500 (a sentence, the traceback on stderr).

    Args:
        app: the API.
        host: the bound address (:func:`allowed_hosts`).
        quiet: no request log on stderr.
    """

    def __init__(self, app: ServeApp, host: str = "127.0.0.1", quiet: bool = False):
        self.app, self.hosts, self.quiet = app, allowed_hosts(host), quiet

    def __call__(self, environ: dict, start_response):
        method = environ.get("REQUEST_METHOD", "")
        try:
            status, body, content_type, extra = self.respond(environ, method)
        except Exception as err:  # noqa: BLE001 - the API's 500: a sentence to the client, details to stderr
            status, body, content_type, extra = self.json(*self.app.failure(err))
        headers = [("Content-Type", content_type), ("Content-Length", str(len(body))),
                   *SECURITY_HEADERS.items(), *extra.items()]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        if not self.quiet:
            sys.stderr.write(f"{environ.get('REMOTE_ADDR', '-')} {method} {environ.get('PATH_INFO', '')[:200]!r} "
                             f"{status}\n")
        return [b"" if method == "HEAD" else body]

    def respond(self, environ: dict, method: str) -> tuple[int, bytes, str, dict]:
        """``(status, body, content type, extra headers)`` of one request."""
        refusal = self.refusal(environ, method)
        if refusal is not None:
            return refusal
        path = environ.get("PATH_INFO", "")
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        if method == "POST":
            return self.json(*self.app.handle("POST", path, {}, environ["wsgi.input"].read(MAX_BODY + 1)))
        if path in ("/", "/index.html") or path.startswith("/static/"):
            name = "index.html" if path in ("/", "/index.html") else path.removeprefix("/static/")
            data = static_file(name)  # a name of STATIC or nothing
            if data is None:
                return self.json(404, {"error": "no such file"})
            return 200, data, STATIC[name], {}
        if path == "/api/grid/image":
            try:
                return 200, self.app.grid_image(query.get("name", "")), "image/png", {}
            except ApiError as err:
                return self.json(err.status, {"error": str(err)})
        return self.json(*self.app.handle("GET", path, query))

    def refusal(self, environ: dict, method: str) -> tuple[int, bytes, str, dict] | None:
        """The answer to a request this server does not take (method, Host, origin, body type), or ``None``."""
        if method not in ("GET", "HEAD", "POST"):
            return self.json(405, {"error": f"method {method[:20]} is not allowed: GET, HEAD or POST"},
                             {"Allow": "GET, HEAD, POST"})
        host = environ.get("HTTP_HOST")
        if self.hosts is not None and host is not None and host_name(host) not in self.hosts:
            return self.json(421, {"error": f"this server answers to {', '.join(sorted(self.hosts))}, not to "
                                            f"Host {host[:60]!r} (cn3 serve --host widens it)"})
        if method != "POST":
            return None
        origin, site = environ.get("HTTP_ORIGIN"), environ.get("HTTP_SEC_FETCH_SITE")
        if site not in (None, "same-origin", "none") or origin is not None and host is not None and \
                origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
            return self.json(403, {"error": "a request from another site's page is refused"})
        content_type = environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return self.json(415, {"error": "a POST must have Content-Type: application/json"})
        return None

    @staticmethod
    def json(status: int, value: dict, extra: dict | None = None) -> tuple[int, bytes, str, dict]:
        return status, json_bytes(value), JSON_TYPE, extra or {}


def _waitress_classes():
    """A waitress channel whose own error answers (a malformed request, a head or body over the caps)
    are JSON with :data:`SECURITY_HEADERS`, like the application's."""
    from waitress.channel import HTTPChannel
    from waitress.task import ErrorTask

    class JsonErrorTask(ErrorTask):
        def execute(self):
            error = self.request.error
            self.status = f"{error.code} {error.reason}"
            message = {413: f"the request body is over {MAX_BODY // 1024} KB",
                       431: f"the request's line and headers are over {MAX_HEADER // 1024} KB"}.get(
                error.code, f"{error.reason}: {error.body}".strip().rstrip(":"))
            body = json_bytes({"error": message})
            self.response_headers.extend([("Content-Type", JSON_TYPE), *SECURITY_HEADERS.items()])
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class JsonErrorChannel(HTTPChannel):
        error_task_class = JsonErrorTask

    return JsonErrorChannel


class Server:
    """A waitress server bound to ``host:port`` (:func:`make_server`); :meth:`serve_forever` answers
    until :meth:`shutdown` (from another thread) or Ctrl-C."""

    def __init__(self, app: ServeApp, host: str, port: int, quiet: bool):
        from waitress.server import create_server

        self.app, self.host = app, host
        self._server = create_server(WsgiApp(app, host, quiet), host=host, port=port, threads=THREADS,
                                     backlog=BACKLOG, connection_limit=BACKLOG, max_request_body_size=MAX_BODY,
                                     max_request_header_size=MAX_HEADER, channel_timeout=60,
                                     asyncore_use_poll=True, ident="cn3-serve", clear_untrusted_proxy_headers=True)
        self._server.channel_class = _waitress_classes()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        for name, level in (("waitress", logging.ERROR), ("waitress.queue", logging.ERROR)):
            logging.getLogger(name).setLevel(level)  # a client that went away is not an error of ours

    @property
    def server_address(self) -> tuple[str, int]:
        return self._server.effective_host, int(self._server.effective_port)

    @property
    def url(self) -> str:
        host, port = self.server_address
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    def serve_forever(self) -> None:
        """Answer requests until :meth:`shutdown` or Ctrl-C; then close every connection."""
        from waitress import wasyncore

        try:
            while not self._stop.is_set():
                wasyncore.loop(timeout=0.5, map=self._server._map, use_poll=True, count=1)
        finally:
            self._server.task_dispatcher.shutdown(timeout=2)
            wasyncore.close_all(self._server._map)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (running in another thread) and wait for it."""
        self._stop.set()
        self._server.pull_trigger()
        self._stopped.wait(10)

    def server_close(self) -> None:
        """Close the listening socket of a server that never served."""
        if not self._stopped.is_set():
            from waitress import wasyncore

            self._server.task_dispatcher.shutdown(timeout=2)
            wasyncore.close_all(self._server._map)


def make_server(app: ServeApp, host: str = "127.0.0.1", port: int = 8008, quiet: bool = False) -> Server:
    """A server bound to ``host:port`` (port 0: a free port, see :attr:`Server.url`), not yet serving:
    the port is taken here, so a caller can bind before loading its models.

    Raises:
        OSError: the port is taken or the host cannot be bound.
    """
    return Server(app, host, port, quiet)


def serve_in_thread(server: Server) -> threading.Thread:
    """Serve ``server`` in a daemon thread (stop it with ``server.shutdown()``)."""
    thread = threading.Thread(target=server.serve_forever, name="cn3-serve", daemon=True)
    thread.start()
    return thread


@contextmanager
def serving(app: ServeApp, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` in a thread for the ``with`` block (port 0: a free one), quietly; yields the base URL
    (``http://127.0.0.1:<port>/``) and shuts the server down and closes its socket on leaving."""
    server = make_server(app, host, port, quiet=True)
    thread = serve_in_thread(server)
    try:
        yield server.url
    finally:
        server.shutdown()
        thread.join(timeout=5)
