"""The loopback server of `mpiscope view`: the page, its data and its tiles (docs/report-protocol.md).

The standard library's ThreadingHTTPServer on 127.0.0.1; every request must carry
the random token of the URL printed at start (else 403), so other users of the
machine and web pages in the browser cannot read the trace.
"""

from __future__ import annotations

import errno
import hmac
import logging
import re
import secrets
import sys
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mpiscope.errors import MpiscopeError, UsageError
from mpiscope.report.store import Store

log = logging.getLogger(__name__)
HOST = "127.0.0.1"
TILE = re.compile(r"^/tile/([be])/(\d{1,2})/(\d{1,10})$")


@dataclass
class App:
    store: Store
    page: bytes
    token: str


class Server(ThreadingHTTPServer):
    daemon_threads = True  # Ctrl-C does not wait for a browser's open connections
    app: App | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # the browser went away mid-answer
            log.debug("view: %s closed the connection", client_address)
        else:
            log.error("view: error answering %s", client_address, exc_info=sys.exc_info())

    @property
    def url(self) -> str:
        token = self.app.token if self.app else ""
        return f"http://{HOST}:{self.server_address[1]}/?token={token}"


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"  # keep-alive: a zoom asks for several tiles
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("view: " + format, *args)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        ctype: str = "text/plain; charset=utf-8",
        cache: str = "no-store",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        token = parse_qs(url.query).get("token", [""])[0]
        if app is None or not hmac.compare_digest(token.encode(), app.token.encode()):
            self._send(
                HTTPStatus.FORBIDDEN, b"forbidden: open the URL mpiscope view printed (with its token)\n"
            )
            return
        if url.path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, app.page, "text/html; charset=utf-8")
        elif url.path == "/data.json":
            self._send(HTTPStatus.OK, app.store.data_json, "application/json")
        elif m := TILE.match(url.path):
            self._tile(app.store, m[1], int(m[2]), int(m[3]))
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n")

    def _tile(self, store: Store, kind: str, k: int, i: int) -> None:
        try:
            blob = store.bin_tile(k, i) if kind == "b" else store.event_tile(k, i)
        except (MpiscopeError, OSError) as e:
            log.warning("view: tile %s/%d/%d failed: %s", kind, k, i, e)
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, f"{e}\n".encode())
            return
        if blob is None:
            self._send(HTTPStatus.NOT_FOUND, b"no such tile\n")
        else:
            self._send(HTTPStatus.OK, blob, "application/octet-stream", "private, max-age=3600")


def bind(port: int = 0) -> Server:
    """The server bound to 127.0.0.1:port (0: a free port), not yet serving."""
    try:
        return Server((HOST, port), Handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {HOST} is in use; choose another with --port, "
                f"or leave --port out to take a free one"
            ) from e
        if e.errno == errno.EACCES:
            raise UsageError(f"port {port} on {HOST} needs privileges; choose a port above 1023") from e
        raise UsageError(f"cannot listen on {HOST}:{port} ({e.strerror}); choose another --port") from e


def new_token() -> str:
    return secrets.token_urlsafe(18)
