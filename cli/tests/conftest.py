"""Helpers for the CLI tests: a fake ingress (stdlib HTTP server in a thread), hook runs,
and the empty working folder the installer tests run from (``no_server_here``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimem_testing.loopback import HangingServer, LoopbackHTTP, QuietHandler, reply


class FakeIngress(LoopbackHTTP):
    """Records every request; answers ``/hook`` with ``status`` and the context endpoint
    with ``{"context": context}``."""

    def __init__(self, status: int = 202, context: str = ""):
        self.status = status
        self.context = context
        self.requests: list[dict] = []
        outer = self

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if self.path.startswith("/hook/session-start-context"):
                    code, out = 200, json.dumps({"context": outer.context, "handoff_id": None}).encode()
                else:
                    code, out = outer.status, json.dumps({"accepted": "c"}).encode()
                reply(self, code, out)

        super().__init__(Handler)

    def hook_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].startswith("/hook?")]


class JsonServer(LoopbackHTTP):
    """A stand-in server on loopback (stdlib HTTP in a thread): ``answer(method, path, body)``
    returns ``(status, JSON-able)`` for every request; ``requests`` records ``(method, path, body)``."""

    def __init__(self, answer):
        self.requests: list[tuple[str, str, object]] = []
        outer = self

        class Handler(QuietHandler):
            def _any(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0) or 0))
                body = json.loads(raw) if raw else None
                outer.requests.append((self.command, self.path, body))
                status, obj = answer(self.command, self.path, body)
                reply(self, status, json.dumps(obj).encode(), "application/json")

            do_GET = do_POST = do_PUT = do_DELETE = _any  # noqa: N815

        super().__init__(Handler)


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


@pytest.fixture
def no_server_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from an empty folder ``tmp_path/cwd`` (returned), with no aimem data dir, token,
    ingress URL or ``XDG_DATA_HOME`` in the environment: the installers' default server data
    dir is ``./data``, and a developer's own stack there (or in their environment) must not
    hand its token or address to the tests."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for name in ("AIMEM_DATA_DIR", "AIMEM_AUTH__TOKEN", "AIMEM_INGRESS_URL", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return cwd
