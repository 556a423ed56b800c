"""``aimem up``: the local stack as plain processes (nats-server + five services).

Starts ``nats-server -js`` storing under ``<data_dir>/nats`` (its log in
``<data_dir>/logs/nats.log`` unless ``--log-dir`` says otherwise), then each service as
``python -m aimem_<svc>`` with the same config, waits for every ``/healthz``, prints the
endpoints, restarts a crashed service or nats-server (same port and store) with exponential
backoff (1 s → 30 s, logged), and on Ctrl-C/SIGTERM stops them all, children first, then
NATS (no orphans: every child, nats-server and Litestream included, also gets SIGTERM via
``PR_SET_PDEATHSIG`` if the supervisor itself is killed). A start that finds a nats-server
or Litestream of this data dir left by a dead supervisor (their pid files,
``aimem_common.runstate``) stops it first; one still run by a live ``aimem up`` is an error
naming the process to stop. While it runs, ``<data_dir>/run/up.json`` says where the stack
is (port base, NATS URL), which ``config.load`` gives every client of that data dir.

``--nats-cluster N`` runs N nats-server processes joined by routes into one JetStream
cluster (client ports NATS_PORT.., route ports ``--nats-route-port``..); the services get
every member's URL and create the streams with 3 replicas, so the bus survives the loss of
one server. With ``replication.s3_bucket`` configured it also runs ``litestream replicate``
on ``db/memory.sqlite`` (see ``aimem_common.replication``).

Without a configured root token (``AIMEM_AUTH__TOKEN`` / ``[auth] token``) it generates one at
first start, ``<data_dir>/auth/token`` (mode 0600, ``config.ensure_token_file``); the
services, the CLI and the installers read it from there (``config.load``), so a fresh stack
is never open, on loopback or on ``--host 0.0.0.0``.

A service that exits with 2 (a configuration error: fixing it needs the operator) is not
restarted; the supervisor says so once. Each nats-server (every cluster member) is probed
every ``NATS_PROBE_S`` on its monitoring ``/healthz``: a JetStream store error (its disk
filled: the server keeps refusing writes even after space returns) seen on
``NATS_PROBE_FAILS`` probes in a row is logged and that server is restarted, which clears it
once the disk has room again. Every server logs to ``nats.log`` (``nats-<i>.log`` in a
cluster) in the log directory.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import typer

from aimem_cli.commands.base import port_base_option
from aimem_common import config, runstate
from aimem_common.natsserver import NatsServer, cluster_nodes, die_with_parent, free_port, port_taken
from aimem_common.replication import litestream_binary, write_litestream_config
from aimem_common.service import CONFIG_ERROR_EXIT

MAX_BACKOFF_S = 30.0
NATS_PROBE_S = 2.0
NATS_PROBE_FAILS = 2


# What nats-server's /healthz says when its store cannot write (nats-server 2.10/2.11 wording:
# "JetStream stream '$G > AIMEM_MUT' write error: ... no space left on device"); every other
# red answer (meta leader elections, replicas catching up) heals without a restart.
STORE_ERROR = re.compile(r"write error|no space left|disk quota|read-only file system|input/output error|"
                         r"insufficient (storage|resources)|jetstream (has been |is )?disabled", re.IGNORECASE)


@dataclass
class Child:
    """One supervised service process."""

    name: str
    module: str
    proc: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    backoff_s: float = 1.0
    log: list[str] = field(default_factory=list)
    argv: list[str] | None = None  # a non-Python child (litestream); default python -m module
    given_up: bool = False  # exited with a configuration error: not restarted
    probe_at: float = 0.0  # nats-server only: last /healthz probe
    probe_fails: int = 0  # nats-server only: store errors seen in a row


def log(msg: str) -> None:
    print(f"[aimem up] {msg}", file=sys.stderr, flush=True)


class Supervisor:
    """Runs NATS and the services; ``run()`` blocks until a stop signal."""

    def __init__(self, settings: config.Settings, nats_nodes: list[NatsServer], env: dict[str, str],
                 log_dir: Path | None, litestream: list[str] | None = None, services: list[str] | None = None):
        self.settings = settings
        self.nats_nodes = nats_nodes  # [] on a read replica: the bus runs elsewhere
        self.nats = nats_nodes[0] if nats_nodes else None
        self.log_dir = log_dir
        self.children = [Child(n, m) for n, m in config.SERVICE_MODULES.items() if services is None or n in services]
        if litestream:  # replicates the DB the writer creates; restarted like a service
            self.children.append(Child("litestream", "", argv=litestream))
        # restart bookkeeping (backoff) for each nats-server
        self.nats_states = [Child(f"nats-server {n.url}", "") for n in nats_nodes]
        self.stopping = False
        # This run's id: our services report it on /healthz (wait_healthy checks it).
        self.instance = env.get(runstate.UP_INSTANCE_ENV) or secrets.token_hex(8)
        self.env = {**env, runstate.UP_INSTANCE_ENV: self.instance}

    def _spawn(self, child: Child) -> None:
        out = None
        if self.log_dir:
            out = open(self.log_dir / f"{child.name}.log", "ab")
        child.proc = subprocess.Popen(
            child.argv or [sys.executable, "-m", child.module],
            env=self.env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
        )
        if out:
            out.close()
        child.started_at = time.monotonic()
        if child.name == "litestream":  # how a later start finds it should this supervisor die
            self.litestream_pid_file.write_text(f"{child.proc.pid}\n")

    @property
    def litestream_pid_file(self) -> Path:
        return self.settings.data_dir / "db" / "litestream.pid"

    def stop_stale(self) -> None:
        """Stop the servers an earlier ``aimem up`` of this data dir left running (its pid files).

        Raises:
            RuntimeError: one still belongs to a live ``aimem up`` (the message says which to stop).
        """
        for node in self.nats_nodes:
            note = node.stop_stale()
            if note:
                log(note)
        if any(c.name == "litestream" for c in self.children):
            config_path = str(self.settings.data_dir / "db" / "litestream.yml")
            note = runstate.stop_stale(self.litestream_pid_file, ["litestream", config_path], "litestream")
            if note:
                log(note)

    def start(self) -> None:
        """Stop stale servers of this data dir, check the ports, start NATS and the services.

        Raises:
            RuntimeError: a port is taken or a server cannot start (nothing of ours left running
            when the ports are taken: that check comes before the first start).
        """
        self.stop_stale()
        self.check_ports()
        for node, state in zip(self.nats_nodes, self.nats_states):
            node.start()
            state.started_at = time.monotonic()
            log(f"nats-server (JetStream) on {node.url}, store {node.store_dir}")
        for child in self.children:
            self._spawn(child)
        # Clients of this data dir (the CLI's NATS verbs, the installers) find the stack here.
        runstate.write_record(self.settings.data_dir, port_base=self.settings.port_base, host=self.settings.host,
                              nats_url=",".join(n.url for n in self.nats_nodes) or self.settings.bus.nats_url)

    def busy_ports(self) -> list[str]:
        """Name every port this stack would listen on that another process holds now.

        Service ports (``port_base`` + offset) on the bind host, and each nats-server's client,
        route and monitoring port. A nats-server port is skipped while this data dir's pid file
        names a live process: that one is ``stop_stale``'s case (ours, left by a dead
        supervisor, or a live ``aimem up`` of the same data dir, which it names).
        """
        busy = []
        for child in self.children:
            if child.name in config.SERVICE_MODULES and port_taken(self.settings.host, self.settings.port(child.name)):
                busy.append(f"port {self.settings.port(child.name)} ({child.name})")
        for node in self.nats_nodes:
            pid = runstate.read_pid(node.pid_file)
            if pid is not None and runstate.cmdline(pid) is not None:
                continue
            ports = [("NATS client", node.port), ("NATS monitoring", node.monitor_port)]
            if node.cluster is not None:
                ports.append(("NATS route", node.cluster.route_port))
            busy += [f"{what} port {port}" for what, port in ports if port and port_taken(node.host, port)]
        return busy

    def check_ports(self) -> None:
        """Refuse to start anything when a port of this stack is taken (``busy_ports``).

        Raises:
            RuntimeError: one line naming the busy ports.
        """
        busy = self.busy_ports()
        if busy:
            raise RuntimeError(f"{', '.join(busy)} on {self.settings.host} already in use by another process "
                               "(another stack?): stop it, or choose other ports (--port-base N, --nats-port N)")

    def wait_healthy(self, timeout_s: float) -> bool:
        """Poll every ``/healthz`` until all answer 200 with this run's ``instance`` id, or
        ``timeout_s`` passes. A 200 from a process that is not ours (another stack on the port)
        does not count."""
        import httpx

        deadline = time.monotonic() + timeout_s
        pending = {c.name for c in self.children if c.name in config.SERVICE_MODULES}
        with httpx.Client(timeout=1.0) as client:
            while pending and time.monotonic() < deadline and not self.stopping:
                for name in list(pending):
                    url = f"http://{self._client_host()}:{self.settings.port(name)}/healthz"
                    try:
                        r = client.get(url)
                        if r.status_code == 200 and r.json().get("instance") == self.instance:
                            pending.discard(name)
                    except (httpx.HTTPError, ValueError, AttributeError):
                        pass
                self.reap()
                time.sleep(0.1)
        if pending:
            log(f"not healthy after {timeout_s:g} s: {', '.join(sorted(pending))}")
        return not pending

    def _client_host(self) -> str:
        host = self.settings.host
        return "127.0.0.1" if host in ("0.0.0.0", "::") else host

    def reap(self) -> None:
        """Restart any child that exited (nats-server included), with exponential backoff."""
        now = time.monotonic()
        for node, state in zip(self.nats_nodes, self.nats_states):
            self._reap_nats(now, node, state)
        for child in self.children:
            if child.proc is None:
                if now >= child.next_start and not self.stopping:
                    log(f"restarting {child.name} (restart #{child.restarts})")
                    self._spawn(child)
                continue
            rc = child.proc.poll()
            if rc is None:
                if now - child.started_at > 60:
                    child.backoff_s = 1.0  # ran long enough: reset the backoff
                continue
            if self.stopping or child.given_up:
                continue
            if rc == CONFIG_ERROR_EXIT:
                child.given_up = True
                where = f" (see {self.log_dir / (child.name + '.log')})" if self.log_dir else ""
                log(f"{child.name} exited with a configuration error ({rc}){where}; not restarting it: "
                    "fix the configuration and run aimem up again")
                continue
            child.restarts += 1
            child.next_start = now + child.backoff_s
            log(f"{child.name} exited with {rc}; restarting in {child.backoff_s:g} s")
            child.backoff_s = min(child.backoff_s * 2, MAX_BACKOFF_S)
            child.proc = None

    def probe_nats(self, node: NatsServer) -> str | None:
        """Return the JetStream store error ``node`` reports on its monitoring ``/healthz``,
        or None when fine (or when it has no monitoring port).

        Only a store error counts (``STORE_ERROR``: a write error, a full or read-only disk,
        JetStream disabled for lack of resources). A cluster member that is electing or
        catching up ("not current with the meta leader", "has not established contact with a
        meta leader") is not red here: restarting it would restart the whole cluster in turn
        each time one member is lost. An unreachable monitoring port is None here: a dead
        server is ``_reap_nats``'s case.
        """
        import httpx

        if not node.monitor_port:
            return None
        try:
            r = httpx.get(f"http://{node.host}:{node.monitor_port}/healthz", timeout=1.0)
        except httpx.HTTPError:
            return None
        if r.status_code == 200:
            return None
        try:
            error = str(r.json().get("error") or r.text)[:300]
        except ValueError:
            error = r.text[:300]
        return error if STORE_ERROR.search(error) else None

    def _probe(self, now: float, node: NatsServer, st: Child) -> None:
        if now - st.probe_at < NATS_PROBE_S or now - st.started_at < NATS_PROBE_S:
            return
        st.probe_at = now
        error = self.probe_nats(node)
        st.probe_fails = st.probe_fails + 1 if error else 0
        if error and st.probe_fails >= NATS_PROBE_FAILS:
            log(f"{st.name} reports a JetStream store error ({error}); restarting it")
            st.probe_fails = 0
            node.stop()  # _reap_nats sees the exit and restarts it with the backoff

    def _reap_nats(self, now: float, node: NatsServer, st: Child) -> None:
        """Restart a dead (or store-wedged) nats-server on the same port and store."""
        proc = node.proc
        if self.stopping or proc is None:
            return
        if st.next_start == 0.0:
            rc = proc.poll()
            if rc is None:
                if now - st.started_at > 60:
                    st.backoff_s = 1.0
                self._probe(now, node, st)
                return
            st.restarts += 1
            st.next_start = now + st.backoff_s
            log(f"{st.name} exited with {rc}; restarting in {st.backoff_s:g} s")
            st.backoff_s = min(st.backoff_s * 2, MAX_BACKOFF_S)
            return
        if now < st.next_start:
            return
        log(f"restarting {st.name} (restart #{st.restarts})")
        try:
            node.start()
        except RuntimeError as exc:  # e.g. the port is still held: try again later
            st.next_start = time.monotonic() + st.backoff_s
            log(f"nats-server did not come back ({exc}); retrying in {st.backoff_s:g} s")
            st.backoff_s = min(st.backoff_s * 2, MAX_BACKOFF_S)
            return
        st.next_start = 0.0
        st.started_at = time.monotonic()

    def stop(self) -> None:
        """SIGTERM every child, wait up to 10 s, SIGKILL stragglers, then stop NATS."""
        self.stopping = True
        for child in self.children:
            if child.proc and child.proc.poll() is None:
                child.proc.terminate()
        deadline = time.monotonic() + 10
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(5)
        for node in self.nats_nodes:
            node.stop()
        runstate.remove_record(self.settings.data_dir)
        ours = [c.proc.pid for c in self.children if c.name == "litestream" and c.proc is not None]
        if ours and runstate.read_pid(self.litestream_pid_file) in ours:
            self.litestream_pid_file.unlink(missing_ok=True)

    def endpoints(self) -> dict[str, str]:
        h = self._client_host()
        s = self.settings
        out = {
            "ingress": f"http://{h}:{s.port('ingress')}/hook",
            "query": f"http://{h}:{s.port('query')}/api/v1 (admin: /admin, docs: /docs)",
            "mcp": f"http://{h}:{s.port('mcp-gateway')}/mcp",
            "writer": f"http://{h}:{s.port('writer')}/healthz",
            "maintainer": f"http://{h}:{s.port('maintainer')}/healthz",
        }
        running = {c.name for c in self.children}
        out = {k: v for k, v in out.items() if ("mcp-gateway" if k == "mcp" else k) in running}
        out["nats"] = ",".join(n.url for n in self.nats_nodes) or s.bus.nats_url
        return out


def up(
    data_dir: Path = typer.Option(None, "--data-dir", help="Data directory (default ./data or $AIMEM_DATA_DIR)."),
    port_base: int = port_base_option("First service port (default 8701)."),
    nats_port: int = typer.Option(None, "--nats-port", help="NATS client port (default from bus.nats_url, 4222; a free one with a "
                                   "--port-base other than 8701 unless bus.nats_url is set; 0 = any free)."),
    host: str = typer.Option(None, "--host", help="Bind address of the services (default 127.0.0.1)."),
    log_dir: Path = typer.Option(None, "--log-dir", help="Write each process's log to <dir>/<name>.log instead of the terminal."),
    log_format: str = typer.Option(None, "--log-format", help="Service logs as text or json (default log_format, auto: "
                                   "text on a terminal, JSON otherwise)."),
    insecure_bind: bool = typer.Option(False, "--insecure-bind", help="Allow a non-loopback bind without an auth "
                                       "token (aimem up always has one: the configured or its generated token)."),
    health_timeout_s: float = typer.Option(30.0, "--health-timeout", help="Seconds to wait for every /healthz."),
    ingress_workers: int = typer.Option(None, "--ingress-workers", min=1, max=64,
                                        help="Ingress worker processes sharing its port (default ingress.workers, 1)."),
    nats_cluster: int = typer.Option(1, "--nats-cluster", min=1, max=5,
                                     help="Run N nats-servers as one JetStream cluster (3 = streams with 3 replicas)."),
    nats_route_port: int = typer.Option(6222, "--nats-route-port",
                                        help="First cluster route port with --nats-cluster (0 = any free)."),
) -> None:
    """Start the local stack in the foreground (NATS + writer, ingress, query, mcp-gateway, maintainer)."""
    overrides = {}
    if port_base is not None:
        overrides["port_base"] = port_base
    if host is not None:
        overrides["host"] = host
    if log_format is not None:
        if log_format not in ("text", "json", "auto"):
            typer.echo(f"aimem up: --log-format must be text, json or auto, not {log_format!r}", err=True)
            raise typer.Exit(2)
        overrides["log_format"] = log_format
    try:
        settings = config.load(data_dir, **overrides)
    except config.ConfigError as exc:
        typer.echo(f"aimem up: {exc.message}", err=True)
        raise typer.Exit(2)
    private_data_dir(settings.data_dir)
    token_note = ensure_root_token(settings, "aimem up")
    if nats_cluster == 2:
        typer.echo("aimem up: --nats-cluster needs 1 or at least 3 servers (2 cannot elect a leader after a loss)", err=True)
        raise typer.Exit(2)
    if nats_port is None:
        # A stack moved with --port-base (say a second one beside the usual) must not meet the
        # first one's NATS on the default port: it takes a free one, unless bus.nats_url names a
        # port. Its clients read the port from run/up.json.
        moved = port_base is not None and port_base != config.Settings.model_fields["port_base"].default
        default_url = settings.bus.nats_url == type(settings.bus).model_fields["nats_url"].default
        nats_port = 0 if moved and default_url else urlparse(settings.bus.nats_urls[0]).port or 4222
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    nats_logs = log_dir or settings.data_dir / "logs"  # nats-server's log is always kept
    nats_logs.mkdir(parents=True, exist_ok=True)
    if nats_cluster == 1:
        nats_nodes = [NatsServer(settings.data_dir / "nats", port=nats_port or free_port(),
                                 log_file=nats_logs / "nats.log")]
    else:
        client_ports = [nats_port + i if nats_port else free_port() for i in range(nats_cluster)]
        route_ports = [nats_route_port + i if nats_route_port else free_port() for i in range(nats_cluster)]
        nats_nodes = cluster_nodes(settings.data_dir / "nats", client_ports, route_ports, log_dir=nats_logs)
    for node in nats_nodes:  # monitoring /healthz: the supervisor's store-error probe
        node.monitor_port = free_port()
        node.token = settings.bus.token or settings.auth.token  # clients present the root token
        node.die_with_parent = True  # a supervisor killed with -9 leaves no nats-server behind
    litestream = None
    if settings.replication.s3_bucket:
        try:
            litestream = [litestream_binary(), "replicate", "-config", str(write_litestream_config(settings))]
        except FileNotFoundError as exc:
            typer.echo(f"aimem up: {exc}", err=True)
            raise typer.Exit(2)
    env = dict(os.environ)
    env.update(
        AIMEM_DATA_DIR=str(settings.data_dir),
        AIMEM_PORT_BASE=str(settings.port_base),
        AIMEM_HOST=settings.host,
        AIMEM_BUS__NATS_URL=",".join(n.url for n in nats_nodes),
        AIMEM_BUS__STREAM_REPLICAS=str(min(3, nats_cluster)),
        PYTHONUNBUFFERED="1",
        AIMEM_LOG_FORMAT=settings.log_format,
    )
    if insecure_bind:
        env["AIMEM_AUTH__INSECURE_BIND"] = "true"
    if ingress_workers is not None:
        env["AIMEM_INGRESS__WORKERS"] = str(ingress_workers)
    if litestream:
        env.pop("AWS_CA_BUNDLE", None)  # litestream refuses custom root CAs ("unable to add custom RootCAs")
    sup = Supervisor(settings, nats_nodes, env, log_dir, litestream)
    log(f"data dir: {settings.data_dir}")
    log(token_note)
    run_foreground(sup, health_timeout_s, "all services healthy:")


def private_data_dir(data_dir: Path) -> None:
    """Keep the memory to its owner: the data dir becomes 0700 and everything this process and
    its children create (the DB, the wiki, the NATS store, logs) is made with umask 077, so
    another account on the machine cannot read the projects from disk."""
    os.umask(0o077)
    try:
        if data_dir.is_dir() and data_dir.stat().st_uid == os.getuid():
            data_dir.chmod(0o700)
    except OSError:
        pass


def ensure_root_token(settings: config.Settings, command: str) -> str:
    """Give ``settings`` a root token: the configured one, else ``<data_dir>/auth/token``
    (generated, mode 0600, on the first start). The services find it there themselves
    (``config.load``). Return the line to log.

    Raises:
        typer.Exit: code 2 when the token file cannot be created or read.
    """
    if settings.auth.token is not None:
        return "auth: the configured root token"
    try:
        settings.auth.token, created = config.ensure_token_file(settings.data_dir)
    except config.ConfigError as exc:
        typer.echo(f"{command}: {exc.message}", err=True)
        raise typer.Exit(2)
    return f"auth: root token {'created in' if created else 'read from'} {config.token_path(settings.data_dir)}"


def run_foreground(sup: Supervisor, health_timeout_s: float, ready: str) -> None:
    """Start ``sup``, print the endpoints once healthy, supervise until SIGINT/SIGTERM, stop.

    Raises:
        typer.Exit: code 1 when a port of the stack is taken by another process or this data
        dir's stack still runs (one line, nothing started), or a process cannot be started.
    """

    def on_signal(signum, _frame):
        sup.stopping = True

    try:  # before anything starts: one line and exit 1 when a port is taken or the data dir is in use
        sup.stop_stale()
        sup.check_ports()
    except RuntimeError as exc:
        typer.echo(f"aimem up: {exc}", err=True)
        raise typer.Exit(1)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        sup.start()
        if sup.wait_healthy(health_timeout_s):
            log(ready)
            for name, url in sup.endpoints().items():
                log(f"  {name:<11} {url}")
        while not sup.stopping:
            sup.reap()
            time.sleep(0.2)
    except RuntimeError as exc:
        log(f"error: {exc}")
        sup.stop()
        raise typer.Exit(1)
    finally:
        log("stopping")
        sup.stop()
        log("stopped")


def register(app: typer.Typer) -> None:
    """Add ``up`` to the CLI."""
    app.command("up")(up)
