"""The skeleton every service shares: its context, its app and lifespan, bind safety, the runner.

A service's ``app.py`` is ``create_app(settings) -> create_service_app(name, settings,
telemetry, start)``. ``start(startup)`` runs once in the lifespan: it builds the service's
parts in the order it needs, using ``startup.connect_bus()`` and ``startup.read_pool()``
(each closed on exit, in reverse order) and ``startup.stack`` for its own clean-ups, and
returns the service's ``ServiceContext`` subclass, which lands on ``app.state.ctx``. The
service's ``deps.py`` turns ``app.state.ctx`` into typed FastAPI dependencies; ``/healthz``
asks ``ctx.health()``. ``__main__`` calls ``main_entry``. No module-level state.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from nats.aio.client import Client as NATS
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from aimem_common import bus as busmod
from aimem_common.config import Settings
from aimem_common.errors import BadRequestError, ConfigError, UnavailableError
from aimem_common.readpool import ReaderPool
from aimem_common.telemetry import Telemetry, setup_logging, setup_tracing
from aimem_common.http import ServiceApp, install_error_handlers, install_gate, install_guard, install_observability

log = logging.getLogger("aimem.service")


def is_loopback(host: str) -> bool:
    """Return True for loopback bind addresses (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(settings: Settings, host: str) -> None:
    """Refuse a non-loopback bind without a root token unless ``auth.insecure_bind``.

    Raises:
        ConfigError: one-line reason (DESIGN.md "Auth").
    """
    if settings.auth.token or settings.auth.insecure_bind or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to bind {host} without auth: set AIMEM_AUTH__TOKEN or pass --insecure-bind"
    )


async def connect_bus(
    settings: Settings, service: str, telemetry: Telemetry, *, wait_s: float = 60.0
) -> tuple[NATS, busmod.Bus]:
    """Connect to NATS (retrying for ``wait_s`` while it starts) and ensure both streams.

    Raises:
        UnavailableError: NATS still unreachable after ``wait_s``.
    """
    deadline = time.monotonic() + wait_s
    delay = 0.2
    while True:
        try:
            nc = await busmod.connect(settings.bus, name=f"aimem-{service}")
            break
        except UnavailableError:
            if time.monotonic() >= deadline:
                raise
            log.warning("NATS not reachable at %s; retrying in %.1f s", settings.bus.nats_url, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    await busmod.ensure_streams_when_ready(nc.jetstream(), settings.bus, deadline_s=max(1.0, deadline - time.monotonic()))
    return nc, busmod.Bus(nc, settings.bus, telemetry.registry)


async def close_nats(nc: NATS) -> None:
    """Drain a connected client; close one that is reconnecting (drain would raise then).

    Use as the lifespan's teardown so a service stops cleanly while NATS is down.
    """
    if nc.is_connected:
        await nc.drain()
    elif not nc.is_closed:
        await nc.close()


@dataclass(slots=True, kw_only=True)
class ServiceContext:
    """What a service's lifespan builds once; on ``app.state.ctx`` while the service runs.

    Each service subclasses it with its own clients (the writer's thread and consumer, the
    query embedder, the maintainer's LLM...). ``read_pool`` is the service's read-only
    ``ReaderPool`` (None in the writer, which owns the read-write connection).
    """

    settings: Settings
    telemetry: Telemetry
    nc: NATS
    bus: busmod.Bus
    read_pool: ReaderPool | None = None

    async def health(self) -> dict[str, Any]:
        """``/healthz`` checks: ``nats`` connected, ``db`` answers ``SELECT 1`` (with a pool).

        Any ``False`` value makes ``/healthz`` answer 503. Subclasses add their own checks.
        """
        checks: dict[str, Any] = {"nats": self.nc.is_connected}
        if self.read_pool is not None:
            checks["db"] = await self.read_pool.run(lambda conn: conn.execute("SELECT 1").fetchone()[0] == 1)
        return checks


def context_of(request: Request) -> Any:
    """Return ``app.state.ctx`` of the app serving ``request`` (a ``ServiceContext``).

    Raises:
        UnavailableError: ``not_ready`` (503) before the lifespan finished starting.
    """
    ctx = getattr(request.app.state, "ctx", None)
    if ctx is None:
        raise UnavailableError("service not ready", code="not_ready")
    return ctx


class Startup:
    """What a service's ``start`` function gets in the lifespan: the shared start-up steps.

    ``stack`` is the lifespan's ``AsyncExitStack``: whatever is pushed on it is closed on
    shutdown, last in first out.
    """

    def __init__(self, service: str, settings: Settings, telemetry: Telemetry, stack: AsyncExitStack):
        self.service = service
        self.settings = settings
        self.telemetry = telemetry
        self.stack = stack

    async def connect_bus(self) -> tuple[NATS, busmod.Bus]:
        """Connect to NATS and ensure the streams (``connect_bus``); drained on shutdown.

        Raises:
            UnavailableError: NATS still unreachable after 60 s.
        """
        nc, bus = await connect_bus(self.settings, self.service, self.telemetry)
        self.stack.push_async_callback(close_nats, nc)
        return nc, bus

    async def read_pool(self, *, size: int, budget_ms: int | None = None, wait_s: float = 60.0,
                        lazy: bool = False) -> ReaderPool:
        """The service's read-only ``ReaderPool``, closed on shutdown.

        Opened now (waiting up to ``wait_s`` for the writer's schema, off the event loop)
        unless ``lazy``: then its first read opens it (ingress must start, and accept hooks,
        before any writer has created the database).

        Raises:
            UnavailableError: not lazy and the database did not appear in ``wait_s``.
        """
        kwargs = {} if budget_ms is None else {"budget_ms": budget_ms}
        text_dir = self.settings.search_dir if self.settings.search.text_index else None
        pool = ReaderPool(self.settings.db_path, size=size, wait_s=wait_s, text_index_dir=text_dir,
                          reuse=not self.settings.query.read_reopen, **kwargs)  # a read replica reopens per read
        self.stack.callback(pool.close)
        if not lazy:
            await asyncio.to_thread(pool.open)
        return pool


def create_service_app(
    service: str,
    settings: Settings,
    telemetry: Telemetry,
    start: Callable[[Startup], Awaitable[ServiceContext]],
    *,
    not_ready: dict[str, Any] | None = None,
    self_auth: tuple[str, ...] = (),
    **fastapi_kwargs: Any,
) -> ServiceApp:
    """The FastAPI app of ``service``: lifespan, error handlers, ``/healthz``, ``/metrics``,
    the drive-by guard (Host, Origin, JSON bodies: ``aimem_common.http.DriveByGuard``) and
    the request gate (credentials before the body, body-read time bound:
    ``aimem_common.http.RequestGate``). A ``ServiceApp``: a hot endpoint may be added with
    ``add_lean_route`` (the same guards, without the framework's own layers).

    Args:
        start: builds the service's parts and returns its context (see the module docstring).
        not_ready: ``/healthz`` checks before ``start`` has finished (default ``{"nats": False}``).
        self_auth: path prefixes whose endpoint authenticates before reading, with its own
            error body (the gate leaves their credentials alone, still bounds their bodies).
        fastapi_kwargs: passed to ``FastAPI`` (``summary``...); ``title`` is ``aimem-<service>``.

    The caller adds its routers to the returned app.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.ctx = await start(Startup(service, settings, telemetry, stack))
            try:
                yield
            finally:
                app.state.ctx = None

    async def health() -> dict[str, Any]:
        ctx = getattr(app.state, "ctx", None)
        return await ctx.health() if ctx is not None else dict(not_ready or {"nats": False})

    app = ServiceApp(title=f"aimem-{service}", lifespan=lifespan, **fastapi_kwargs)
    app.state.ctx = None
    install_error_handlers(app)
    install_gate(app, settings, self_auth)  # innermost: timed and traced, behind the guard
    install_observability(app, telemetry, health, settings.up_instance)
    install_guard(app, [*settings.allowed_hosts, *settings.mcp_allowed_hosts], settings.host)
    return app


class JsonErrorHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, whose answer to a request it cannot parse is our JSON error.

    A request the HTTP parser rejects (a ``Content-Length`` that is not a number, a malformed
    request line or header, a body longer than it said) never reaches the app: uvicorn answers
    it ``400`` with a plain-text ``Invalid HTTP request received.`` and closes the connection.
    This answers the same status and closes the same way, with the body every other error has:
    ``{"error": {"code": "invalid_http", "message": ...}}`` (``application/json``).
    """

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(BadRequestError(f"the HTTP request could not be parsed ({msg.rstrip('.')})",
                                          code="invalid_http").envelope()).encode()
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"content-type: application/json\r\n",
                        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                        b"connection: close\r\n", b"\r\n", body])
        self.transport.write(b"".join(content))
        self.transport.close()


def run_service(service: str, settings: Settings, app_factory: Callable[[Settings], FastAPI], *,
                workers: int = 1, worker_factory: str | None = None) -> None:
    """Run ``service`` under uvicorn on ``settings.host:port(service)`` (blocking).

    Sets up logs (JSON, or text on a terminal: ``settings.log_format``) and tracing first; logs the absolute data dir loudly. uvicorn runs on
    uvloop with the httptools parser (both from ``uvicorn[standard]``; ``JsonErrorHttpProtocol``). With ``workers`` > 1
    (a stateless service only) uvicorn forks that many processes sharing the one listening
    socket, each building its app from ``worker_factory`` (``"module:function"``, no
    arguments, see ``worker_app``).
    """
    setup_logging(service, settings.log_level, settings.log_format)
    setup_tracing(service, settings.otlp_endpoint)
    check_bind(settings, settings.host)
    log.info("starting aimem-%s on %s:%d (%d worker%s), data dir %s", service, settings.host, settings.port(service),
             workers, "" if workers == 1 else "s", settings.data_dir)
    # ws="none": no service speaks WebSocket, so an upgrade request is served as plain HTTP.
    common = dict(host=settings.host, port=settings.port(service), loop="uvloop", http=JsonErrorHttpProtocol, ws="none",
                  log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    if workers > 1 and worker_factory is not None:
        # Config errors are found by ``config.load`` and ``check_bind`` before uvicorn forks.
        uvicorn.run(worker_factory, factory=True, workers=workers, **common)
        return
    app = freeze_after_startup(app_factory(settings))
    failed: list[ConfigError] = []
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: FastAPI):
        # A configuration error found at start-up (streams that cannot fit the disk, ...)
        # must exit 2 like one found while loading: the supervisor does not restart those.
        try:
            async with inner(a) as state:
                yield state
        except ConfigError as exc:
            failed.append(exc)
            raise

    app.router.lifespan_context = lifespan
    try:
        uvicorn.run(app, **common)
    except SystemExit:
        if failed:
            raise failed[0] from None
        raise
    if failed:
        raise failed[0]


def worker_app(service: str, app_factory: Callable[[Settings], FastAPI]) -> FastAPI:
    """The app of one uvicorn worker process: config loaded, logs and tracing set up, built."""
    from aimem_common import config

    settings = config.load()
    setup_logging(service, settings.log_level, settings.log_format)
    setup_tracing(service, settings.otlp_endpoint)
    return freeze_after_startup(app_factory(settings))


def freeze_after_startup(app: FastAPI) -> FastAPI:
    """Make ``app``'s lifespan collect, then ``gc.freeze()``, once its start-up has finished.

    A service process holds ~80,000 objects the collector tracks once it has started
    (modules, the framework's routes and models, pydantic's validators), nearly all of
    them alive until it exits. A full collection walks every one: ~47 ms of a stopped
    event loop in the ingress on a 2-core VM, rarely, but then every request in flight
    waits for it. Frozen, they are left out of every collection (a full one then takes
    ~0.2 ms; in a writer draining a backlog, whose batches keep thousands of objects
    alive, 39–62 ms instead of 84–141); what is allocated later is collected as before.
    ``aimem_gc_frozen_objects`` on ``/metrics`` shows how many are frozen. For service
    processes only (``run_service``, ``worker_app``): an app built in a test process
    would pin that process's objects for its lifetime. Returns ``app``.
    """
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: FastAPI):
        async with inner(a) as state:
            freeze_heap()
            yield state

    app.router.lifespan_context = lifespan
    return app


def freeze_heap() -> int:
    """Collect, then freeze every object alive now out of later collections; return how
    many are frozen (``gc.get_freeze_count``). What start-up left as garbage is freed
    first, not pinned."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("%d objects frozen after start-up", frozen)
    return frozen


CONFIG_ERROR_EXIT = 2  # `aimem up` does not restart a service that exits with this


def main_entry(service: str, app_factory: Callable[[Settings], FastAPI], *,
               workers: Callable[[Settings], int] | None = None, worker_factory: str | None = None) -> None:
    """``python -m aimem_<service>``: load config once and run; config errors exit 2
    (``CONFIG_ERROR_EXIT``), whether found while loading or during start-up (in worker
    mode: before uvicorn forks).

    ``workers(settings)`` and ``worker_factory``: see ``run_service`` (stateless services).
    """
    import sys

    from aimem_common import config

    try:
        settings = config.load()
        run_service(service, settings, app_factory, workers=workers(settings) if workers else 1,
                    worker_factory=worker_factory)
    except ConfigError as exc:
        print(f"aimem-{service}: {exc.message}", file=sys.stderr)
        sys.exit(CONFIG_ERROR_EXIT)
