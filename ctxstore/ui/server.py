"""The ``ctx ui`` server: the pages, their assets and the API, on 127.0.0.1 behind a token.

Standard library only (``http.server.ThreadingHTTPServer``). It binds 127.0.0.1 on a port the
system picks, so nothing listens on another address; every URL starts with ``/<token>/``
(192 random bits), and a request without it, or with a ``Host`` header other than
this address and port (a page elsewhere reaching it through DNS rebinding), gets 403. Only GET
is served (anything else: 405). Responses say ``Cache-Control: no-store``, forbid framing and
carry a content security policy that lets a page load only this server's own scripts, styles
and data.

Requests are served on their own threads, but every use case runs on one worker thread that
owns the ``Session`` (a session, and its SQLite connection, is used by one thread at a time).
Nothing here prints: the command line prints the URL.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import socketserver
import string
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ctxstore.errors import CtxError, InvalidInput, NodeNotFound
from ctxstore.session import Session
from ctxstore.ui import pages

__all__ = ["UiServer", "HOST", "CONTENT_SECURITY_POLICY", "asset_bytes", "new_token"]

HOST = "127.0.0.1"
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8"}
_MAX_FIELDS = 32  # query parameters a request may carry
_LIVE_DATA = b"window.CTX_STATIC = false;\n"


def new_token() -> str:
    """A random URL-safe token: 24 bytes from the operating system's generator (192 bits)."""
    # base64 of os.urandom is what secrets.token_urlsafe returns
    return base64.urlsafe_b64encode(os.urandom(24)).rstrip(b"=").decode("ascii")


def asset_bytes(name: str) -> bytes:
    """The bytes of a page (the shipped template, filled) or of an asset (``assets/NAME``).

    Args:
        name: One of ``pages.PAGES`` or ``pages.ASSETS``.

    Returns:
        Its content.
    """
    assets = resources.files("ctxstore.ui").joinpath("assets")
    if name not in pages.PAGE_VIEWS:
        return assets.joinpath(name).read_bytes()
    view, title = pages.PAGE_VIEWS[name]
    template = string.Template(assets.joinpath(pages.PAGE_TEMPLATE).read_text("utf-8"))
    return template.substitute(page=view, title=title).encode("utf-8")


class UiServer:
    """The server of one store, from ``start`` to ``close``.

    Attributes:
        token: The secret every URL starts with.
    """

    def __init__(self, ctx_dir: Path, *, token: str | None = None,
                 open_session: Callable[[Path], Session] = Session.open) -> None:
        """Bind 127.0.0.1 on a free port (nothing is served before ``serve_forever``).

        Args:
            ctx_dir: The store's ``.ctx`` directory.
            token: The URL's secret (None: a new random one).
            open_session: How the worker thread opens the session.
        """
        self.token = token or new_token()
        self._ctx_dir = ctx_dir
        self._open_session = open_session
        self._session: Session | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctx-ui")
        self._files = {name: asset_bytes(name) for name in (*pages.PAGES, *pages.ASSETS)}
        self._httpd = _HttpServer((HOST, 0), _Handler)
        self._httpd.ui = self
        self._closed = threading.Event()

    @classmethod
    def start(cls, ctx_dir: Path, **kwargs: Any) -> UiServer:
        """Bind, open the store and bring its index up to date (the first page then is quick).

        Args:
            ctx_dir: The store's ``.ctx`` directory.
            **kwargs: As ``UiServer``'s.

        Returns:
            The server, ready for ``serve_forever``.

        Raises:
            CtxError: the store cannot be opened or its index read (the server is closed).
            OSError: no port could be bound.
        """
        server = cls(ctx_dir, **kwargs)
        try:
            server._worker.submit(server._warm).result()
        except BaseException:
            server.close()
            raise
        return server

    @property
    def address(self) -> tuple[str, int]:
        """The bound address: ``("127.0.0.1", port)``."""
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The URL of the timeline page, token included."""
        host, port = self.address
        return f"http://{host}:{port}/{self.token}/"

    def serve_forever(self) -> None:
        """Serve until ``shutdown`` is called (from another thread, or a signal handler)."""
        self._httpd.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (call from another thread)."""
        self._httpd.shutdown()

    def close(self) -> None:
        """Close the socket, then the session on its own thread; idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._httpd.server_close()
        self._worker.submit(self._close_session).result()
        self._worker.shutdown(wait=True)

    # -- on the worker thread ------------------------------------------------------------
    def _db(self) -> Session:
        if self._session is None:
            self._session = self._open_session(self._ctx_dir)
        return self._session

    def _warm(self) -> None:
        self._db().index()

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _answer(self, name: str, params: dict[str, str]) -> tuple[int, Any]:
        try:
            return HTTPStatus.OK, pages.answer(self._db(), name, params)
        except NodeNotFound as exc:
            return HTTPStatus.NOT_FOUND, _error(exc)
        except InvalidInput as exc:
            return HTTPStatus.BAD_REQUEST, _error(exc)
        except CtxError as exc:
            return HTTPStatus.INTERNAL_SERVER_ERROR, _error(exc)

    # -- on a request thread ---------------------------------------------------------------
    def api(self, name: str, params: dict[str, str]) -> tuple[int, Any]:
        """The answer of API ``name`` with its HTTP status, computed on the worker thread.

        Args:
            name: The API's name (``pages.API``).
            params: Its parameters.

        Returns:
            ``(status, JSON-ready body)``; a ``CtxError`` is a body ``{"error": ...}``.
        """
        return self._worker.submit(self._answer, name, params).result()

    def file(self, name: str) -> bytes | None:
        """A page, an asset (``assets/NAME``) or ``data.js``; None for anything else."""
        if name == "data.js":
            return _LIVE_DATA
        if name.startswith("assets/"):
            name = name.removeprefix("assets/")
            return self._files.get(name) if name in pages.ASSETS else None
        return self._files.get(name) if name in pages.PAGES else None


def _error(exc: CtxError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, "hint": exc.hint}}


class _HttpServer(ThreadingHTTPServer):
    """Threads that never keep the process alive; the ``UiServer`` they answer for."""

    daemon_threads = True
    ui: UiServer

    def server_bind(self) -> None:
        """Bind, without ``HTTPServer``'s ``socket.getfqdn``: a name lookup may leave the machine."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    """One request: token and host checked, then a file or an API answer."""

    server: _HttpServer
    server_version = "ctx-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection frees its thread
    # Headers and body go out in two writes: with Nagle's algorithm on, the body waited for the
    # client's delayed ACK, 40 ms on every answer of a kept-alive connection (bench/ui.py).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """Log nothing: the library never prints, and the URL's token must not reach a log."""

    def _send(self, status: int, body: bytes, content_type: str,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = {"Content-Type": content_type, "Content-Length": str(len(body)),
                   "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                   "Cross-Origin-Resource-Policy": "same-origin",
                   "Content-Security-Policy": CONTENT_SECURITY_POLICY, **(extra or {})}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, text: str, extra: dict[str, str] | None = None) -> None:
        self._send(status, text.encode() + b"\n", "text/plain; charset=utf-8", extra)

    def _allowed_host(self) -> bool:
        port = self.server.ui.address[1]
        return self.headers.get("Host", "") in (f"{HOST}:{port}", f"localhost:{port}")

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        """Serve a page, an asset, ``data.js`` or an API answer to a request with the token."""
        ui = self.server.ui
        parts = urlsplit(self.path)
        token, sep, rest = parts.path.lstrip("/").partition("/")
        if not self._allowed_host() or not hmac.compare_digest(token.encode(), ui.token.encode()):
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden")
            return
        if not sep:  # /TOKEN: the pages' relative links need the trailing slash
            self._send(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain; charset=utf-8",
                       {"Location": f"/{ui.token}/"})
            return
        if rest.startswith("api/"):
            try:
                query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=_MAX_FIELDS)
            except ValueError:
                self._refuse(HTTPStatus.BAD_REQUEST, "too many query parameters")
                return
            status, body = ui.api(rest.removeprefix("api/"), {k: v[-1] for k, v in query.items()})
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            self._send(status, data, "application/json; charset=utf-8")
            return
        name = rest or "index.html"
        content = ui.file(name)
        if content is None:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")
            return
        self._send(HTTPStatus.OK, content, _TYPES[Path(name).suffix])

    def _only_get(self) -> None:
        # No body is read or sent (a HEAD answer has none): the connection is closed instead.
        self.close_connection = True
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        for key, value in (("Allow", "GET"), ("Content-Length", "0"), ("Connection", "close"),
                           ("Cache-Control", "no-store")):
            self.send_header(key, value)
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _only_get  # noqa: N815
