"""Stand-in servers for tests: on 127.0.0.1, at a port the OS picks, served from one thread.

``LoopbackHTTP(handler)`` serves a ``BaseHTTPRequestHandler`` subclass while it is entered
(``with``) and closes its socket on exit; ``QuietHandler`` is such a base that logs nothing;
``reply`` writes one whole response from inside a handler. The fakes built on them (the CLI
tests' ingress and JSON server, the deploy tests' OTLP receiver) decide what is answered.
``HangingServer`` accepts connections and never answers (a server that hangs).
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["HangingServer", "LoopbackHTTP", "QuietHandler", "reply"]


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that writes no access log to stderr."""

    def log_message(self, *args) -> None:
        pass


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str | None = None) -> None:
    """Send ``status`` with ``body`` (its length as ``Content-Length``, and ``content_type`` when given)."""
    handler.send_response(status)
    if content_type:
        handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Served:
    """A loopback server whose socket is bound at construction (``url`` is known before
    ``with``) and whose ``thread`` starts on entering."""

    thread: threading.Thread

    @property
    def port(self) -> int:
        raise NotImplementedError

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        return self


class LoopbackHTTP(_Served):
    """``handler`` served by the stdlib's threading HTTP server from a daemon thread; leaving
    the ``with`` shuts the server down and closes its socket."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class HangingServer(_Served):
    """Accepts TCP connections and never answers (the server that hangs); leaving the
    ``with`` stops accepting and closes every connection it took."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns: list[socket.socket] = []
        self.stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                continue

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.stop = True
        self.thread.join(1)
        for c in self.conns:
            c.close()
        self.sock.close()
