"""Helpers for the CLI tests: a fake ingress (stdlib HTTP server in a thread), hook runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


class FakeIngress:
    """Records every request; answers ``/hook`` with ``status`` and the context endpoint
    with ``{"context": context}``."""

    def __init__(self, status: int = 202, context: str = ""):
        self.status = status
        self.context = context
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if self.path.startswith("/hook/session-start-context"):
                    code, out = 200, json.dumps({"context": outer.context, "handoff_id": None}).encode()
                else:
                    code, out = outer.status, json.dumps({"accepted": "c"}).encode()
                self.send_response(code)
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def hook_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].startswith("/hook?")]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class JsonServer:
    """A stand-in server on loopback (stdlib HTTP in a thread): ``answer(method, path, body)``
    returns ``(status, JSON-able)`` for every request; ``requests`` records ``(method, path, body)``."""

    def __init__(self, answer):
        self.requests: list[tuple[str, str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
                body = json.loads(raw) if raw else None
                outer.requests.append((self.command, self.path, body))
                status, obj = answer(self.command, self.path, body)
                out = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = _any  # noqa: N815

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class HangingServer:
    """Accepts TCP connections and never answers (the server that hangs)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns: list[socket.socket] = []
        self.stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self):
        self.sock.settimeout(0.1)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                continue

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join(1)
        for c in self.conns:
            c.close()
        self.sock.close()


def run_hook(args: list[str], payload: dict | bytes | None, *, data_dir: Path, url: str,
             extra_env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run the real ``aimem hook`` console script; return ``(completed, wall seconds)``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    # Delivery tests get a roomy budget (the suite shares two cores with other runs);
    # the timing tests pass AIMEM_HOOK_BUDGET_MS=150, the shipped default, explicitly.
    env.update(AIMEM_DATA_DIR=str(data_dir), AIMEM_INGRESS_URL=url, AIMEM_HOOK_BUDGET_MS="1500")
    env.update(extra_env or {})
    data = payload if isinstance(payload, bytes) else json.dumps(payload or {}).encode()
    aimem = Path(sys.executable).with_name("aimem")
    t0 = time.monotonic()
    proc = subprocess.run([str(aimem), "hook", *args], input=data, capture_output=True, env=env,
                          cwd=cwd, timeout=30)
    return proc, time.monotonic() - t0


@pytest.fixture
def fake_ingress():
    with FakeIngress() as f:
        yield f


@pytest.fixture
def hanging_server():
    with HangingServer() as h:
        yield h


@pytest.fixture
def hook():
    """The ``run_hook`` helper (importlib mode: tests cannot import conftest directly)."""
    return run_hook


@pytest.fixture
def json_server():
    """``JsonServer`` itself (importlib mode: tests cannot import conftest directly)."""
    return JsonServer


@pytest.fixture
def ingress_factory():
    """``FakeIngress`` itself, for tests that need several with other answers."""
    return FakeIngress
