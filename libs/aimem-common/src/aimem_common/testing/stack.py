"""Run the whole local stack (``aimem up``) as real processes — for e2e tests and benchmarks.

``LocalStack(data_dir, log_dir).start()`` picks free ports, runs ``python -m aimem_cli up``
in its own session, waits for every ``/healthz`` and ``stop()`` sends SIGINT (Ctrl-C) and
reaps it, SIGKILLing the process group if it hangs.
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

from aimem_common.config import PORT_OFFSETS
from aimem_common.natsserver import free_port


def free_port_block(n: int = 5) -> int:
    """Return a base port with ``n`` consecutive free TCP ports on 127.0.0.1."""
    for _ in range(100):
        base = free_port()
        if base + n > 65000:
            continue
        socks: list[socket.socket] = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


class LocalStack:
    """The five services + NATS via ``aimem up``, on free ports, data in ``data_dir``."""

    def __init__(self, data_dir: Path, log_dir: Path, extra_env: dict[str, str] | None = None,
                 nats_cluster: int = 1):
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.port_base = free_port_block()
        self.nats_cluster = nats_cluster
        self.nats_port = free_port() if nats_cluster == 1 else free_port_block(nats_cluster)
        self.route_port = free_port_block(nats_cluster) if nats_cluster > 1 else 0
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen | None = None

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
                try:
                    if httpx.get(self.url(svc) + "/healthz", timeout=0.5).status_code == 200:
                        pending.remove(svc)
                except httpx.HTTPError:
                    pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if pending:
            logs = "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in self.log_dir.glob("*.log"))
            self.stop()
            raise RuntimeError(f"stack not healthy: {pending}\n{logs}")
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
