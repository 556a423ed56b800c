"""Shared pytest fixtures: a real nats-server per test, temp data dirs, settings, the stack.

Every process a fixture starts is stopped in its teardown; ports are free ports, so the
suite can run twice at once on one machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from aimem_common import config
from aimem_common.natsserver import NatsServer, free_port
from aimem_common.testing.stack import LocalStack as Stack
from aimem_common.testing.stack import free_port_block as _free_port_block

REPO = Path(__file__).resolve().parent
SHARED = REPO.parent / "shared"


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` beside the repo; skips the test with a reason when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared (fixtures and data) is not present beside the repo")
    return SHARED


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def nats_server(tmp_path: Path):
    """A real ``nats-server -js`` on a free port with its store in ``tmp_path``."""
    with NatsServer(tmp_path / "nats-store") as server:
        yield server


@pytest.fixture
def settings(data_dir: Path, nats_server: NatsServer) -> config.Settings:
    """Settings for one test: temp data dir, the test's NATS, free service ports."""
    return config.load(data_dir, environ={}, bus={"nats_url": nats_server.url}, port_base=_free_port_block())


@pytest.fixture
def stack(tmp_path: Path):
    """A running local stack with its own data dir, ports and NATS; stopped after the test."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    s = Stack(tmp_path / "data", log_dir).start()
    try:
        yield s
    finally:
        s.stop()


MODULES = {
    "writer": "aimem_writer",
    "ingress": "aimem_ingress",
    "query": "aimem_query",
    "mcp-gateway": "aimem_mcp",
    "maintainer": "aimem_maintainer",
}


def settings_env(settings: config.Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that makes a child service load exactly ``settings``' key values."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(
        AIMEM_DATA_DIR=str(settings.data_dir),
        AIMEM_PORT_BASE=str(settings.port_base),
        AIMEM_BUS__NATS_URL=settings.bus.nats_url,
        PYTHONUNBUFFERED="1",
    )
    if settings.auth.token:
        env["AIMEM_AUTH__TOKEN"] = settings.auth.token
    env.update(extra or {})
    return env


class ServiceProc:
    """One real service process (``python -m aimem_<svc>``) for integration tests."""

    def __init__(self, settings: config.Settings, service: str, log_dir: Path, extra_env: dict[str, str] | None = None):
        self.settings = settings
        self.service = service
        self.log_path = log_dir / f"{service}.log"
        self.env = settings_env(settings, extra_env)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port(self.service)}"

    def start(self, timeout_s: float = 20.0) -> "ServiceProc":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULES[self.service]], env=self.env, stdout=log, stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.service} exited {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.service} not healthy in {timeout_s} s:\n{self.log_path.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self) -> None:
        """SIGKILL (crash tests)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def services(settings: config.Settings, tmp_path: Path):
    """Factory: ``services("writer", "query")`` starts real service processes (stopped after).

    Returns a dict name -> ServiceProc. Start the writer first: readers wait for its schema.
    """
    started: list[ServiceProc] = []
    log_dir = tmp_path / "logs"
    log_dir.mkdir(exist_ok=True)

    def start(*names: str, extra_env: dict[str, str] | None = None) -> dict[str, ServiceProc]:
        out = {}
        for name in names:
            proc = ServiceProc(settings, name, log_dir, extra_env).start()
            started.append(proc)
            out[name] = proc
        return out

    try:
        yield start
    finally:
        for proc in reversed(started):
            proc.stop()


@pytest_asyncio.fixture
async def bus(settings: config.Settings):
    """A connected ``aimem_common.bus.Bus`` on the test's NATS (streams ensured)."""
    from aimem_common import bus as busmod

    nc = await busmod.connect(settings.bus, name="test", reconnect=False)
    await busmod.ensure_streams(nc.jetstream(), settings.bus)
    try:
        yield busmod.Bus(nc, settings.bus)
    finally:
        await nc.close()


@pytest.fixture
def fake_llm():
    """An OpenAI-compatible test LLM server over real HTTP (``aimem_common.testing.fake_llm``).

    Point a service at ``fake_llm.url``; steer it with ``.mode`` / ``.script`` / ``.answers``.
    """
    from aimem_common.testing.fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server
