"""Real service processes for tests and benchmarks: one service, or the whole local stack.

* ``ServiceProc(settings, "writer", log_dir).start()`` runs ``python -m aimem_writer`` with the
  environment that makes it load exactly ``settings`` and waits for its ``/healthz``.
* ``LocalStack(data_dir, log_dir).start()`` picks free ports, runs ``python -m aimem_cli up``
  in its own session and waits for every service's ``/healthz``; ``stop()`` sends SIGINT
  (Ctrl-C) and reaps it, SIGKILLing the process group if it hangs. ``aimem up`` is never
  open: ``token`` is the root token it uses (the one in ``extra_env``, else the one it
  generated in ``<data_dir>/auth/token``); send ``headers``, or ``client_env()`` to a CLI.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from aimem_common import config
from aimem_common.config import PORT_OFFSETS
from aimem_common.natsserver import free_port


def free_port_block(n: int = 5) -> int:
    """Return a base port with ``n`` consecutive free TCP ports on 127.0.0.1 (see ``free_port``)."""
    return free_port(count=n)


def healthy(url: str) -> bool:
    """True when ``GET <url>/healthz`` answers 200 within half a second."""
    try:
        return httpx.get(url + "/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def log_tail(paths: list[Path], chars: int = 3000) -> str:
    """The last ``chars`` characters of each log file, headed by its name."""
    return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in paths if p.exists())


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
        self.log_path = Path(log_dir) / f"{service}.log"
        self.env = settings_env(settings, extra_env)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port(self.service)}"

    def start(self, timeout_s: float = 20.0) -> "ServiceProc":
        """Start and wait for ``/healthz`` 200.

        Raises:
            RuntimeError: the process exited, or was not healthy within ``timeout_s`` (with
                the tail of its log).
        """
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", config.SERVICE_MODULES[self.service]], env=self.env, stdout=log, stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.service} exited {self.proc.returncode}:\n{log_tail([self.log_path])}")
            if healthy(self.url):
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.service} not healthy in {timeout_s} s:\n{log_tail([self.log_path])}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` and wait (SIGKILL after 15 s). Idempotent."""
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


class LocalStack:
    """The five services + NATS via ``aimem up``, on free ports, data in ``data_dir``."""

    def __init__(self, data_dir: Path, log_dir: Path, extra_env: dict[str, str] | None = None,
                 nats_cluster: int = 1):
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.port_base = free_port_block()
        self.nats_cluster = nats_cluster  # > 1: `aimem up --nats-cluster N` (routes on free ports)
        self.nats_port = free_port() if nats_cluster == 1 else free_port_block(nats_cluster)
        self.route_port = free_port_block(nats_cluster) if nats_cluster > 1 else 0
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None
        self.token: str | None = None  # the root token, known once start() returned

    @property
    def headers(self) -> dict[str, str]:
        """``{"Authorization": "Bearer <token>"}`` for requests to the running stack."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client_env(self, **extra: str) -> dict[str, str]:
        """This process's environment without ``AIMEM_*``, plus the stack's URLs and token,
        for ``aimem`` CLI/hook subprocesses (``extra`` last)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        env.update(AIMEM_INGRESS_URL=self.url("ingress"), AIMEM_SERVER_URL=self.url("query"))
        if self.token:
            env["AIMEM_AUTH__TOKEN"] = self.token
        env.update(extra)
        return env

    def url(self, service: str) -> str:
        """Base URL of ``service`` (``ingress``, ``query``, ``mcp-gateway``, ``writer``, ``maintainer``)."""
        return f"http://127.0.0.1:{self.port_base + PORT_OFFSETS[service]}"

    @property
    def nats_url(self) -> str:
        """The NATS URL(s) the services use (comma-separated for a cluster)."""
        return ",".join(f"nats://127.0.0.1:{self.nats_port + i}" for i in range(self.nats_cluster))

    def start(self, timeout_s: float = 45.0) -> "LocalStack":
        """Start and wait until every ``/healthz`` answers 200.

        Raises:
            RuntimeError: not healthy within ``timeout_s`` (with the tail of the logs).
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        env.update(self.extra_env)
        with open(self.log_dir / "up.log", "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aimem_cli", "up", "--data-dir", str(self.data_dir),
                 "--port-base", str(self.port_base), "--nats-port", str(self.nats_port),
                 "--log-dir", str(self.log_dir), "--nats-cluster", str(self.nats_cluster),
                 "--nats-route-port", str(self.route_port)],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        pending = list(PORT_OFFSETS)
        while pending and time.monotonic() < deadline:
            for svc in list(pending):
                if healthy(self.url(svc)):
                    pending.remove(svc)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if pending:
            logs = log_tail(sorted(self.log_dir.glob("*.log")), 1500)
            self.stop()
            raise RuntimeError(f"stack not healthy: {pending}\n{logs}")
        self.token = config.load(self.data_dir, environ=env, check_writable=False).auth.token
        return self

    def stop(self) -> None:
        """Ctrl-C the supervisor and wait; SIGKILL the group after 30 s. Idempotent."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def __enter__(self) -> "LocalStack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
