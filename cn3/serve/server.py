"""The HTTP side of ``cn3 serve``: the standard library's ``ThreadingHTTPServer`` and one handler.

The standard library rather than a web framework: the server answers a handful of JSON routes and
three static files to one local user, which needs no routing, templating or async machinery, and
costs the install nothing (displaCy serves its page the same way).

What a request can reach: the API (:class:`cn3.serve.api.ServeApp`), the page's files by a fixed
list of names (:data:`STATIC`, read from the package, never a path from the URL) and the grid's
PNGs by their names in its report. Every answer carries ``X-Content-Type-Options: nosniff`` and a
Content-Security-Policy allowing this origin only (no CDN can be reached from the page). JSON
escapes ``<``, ``>`` and ``&`` (``\\u003c`` ...), so typed text comes back as data, never markup.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from cn3.serve.api import MAX_BODY, ApiError, ServeApp

#: the page's files: name -> content type (served from ``cn3/serve/static/``)
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}
#: hosts that keep the server on this machine
LOCAL_HOSTS = ("127.0.0.1", "localhost")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def json_bytes(value: dict) -> bytes:
    """UTF-8 JSON with ``<``, ``>``, ``&`` and the JavaScript line separators escaped."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode("utf-8")


def static_file(name: str) -> bytes | None:
    """The bytes of the page's file ``name`` when it is in :data:`STATIC` and shipped, else ``None``."""
    if name not in STATIC:
        return None
    resource = resources.files("cn3.serve").joinpath("static", name)
    return resource.read_bytes() if resource.is_file() else None


class Handler(BaseHTTPRequestHandler):
    """One request: the route decides; nothing of the path reaches the file system."""

    app: ServeApp  # set on the subclass :func:`make_server` builds
    server_version = "cn3-serve"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        if url.path in ("/", "/index.html"):
            self._static("index.html")
        elif url.path.startswith("/static/"):
            self._static(url.path.removeprefix("/static/"))
        elif url.path == "/api/grid/image":
            try:
                self._send(200, self.app.grid_image(query.get("name", "")), "image/png")
            except ApiError as err:
                self._json(err.status, {"error": str(err)})
        else:
            self._json(*self.app.handle("GET", url.path, query))

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length > MAX_BODY:
            self.close_connection = True  # the body stays unread
            self._json(413, {"error": f"the request body is over {MAX_BODY // 1024} KB"})
            return
        if length < 0:
            self.close_connection = True
            self._json(400, {"error": "a bad Content-Length header"})
            return
        body = self.rfile.read(length) if length else b""
        self._json(*self.app.handle("POST", url.path, {}, body))

    def _static(self, name: str) -> None:
        data = static_file(name)
        if data is None:
            self._json(404, {"error": "no such file"})
        else:
            self._send(200, data, STATIC[name])

    def _json(self, status: int, value: dict) -> None:
        self._send(status, json_bytes(value), "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in SECURITY_HEADERS.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        if self.server.quiet:
            return
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


class Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` over an app; ``quiet`` silences the request log (tests)."""

    daemon_threads = True
    quiet = False

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"


def make_server(app: ServeApp, host: str = "127.0.0.1", port: int = 8008, quiet: bool = False) -> Server:
    """A server bound to ``host:port`` (port 0: a free port, see :attr:`Server.url`), not yet serving.

    Raises:
        OSError: the port is taken or the host cannot be bound.
    """
    handler = type("AppHandler", (Handler,), {"app": app})
    server = Server((host, port), handler)
    server.quiet = quiet
    return server


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
        server.server_close()
        thread.join(timeout=5)
