"""What every service process shares: bus connection at startup, bind safety, the runner.

Each service's ``app.py`` builds its own FastAPI app and lifespan; it calls
``connect_bus`` there and ``run_service`` from ``__main__``. No module-level state.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from contextlib import asynccontextmanager
from typing import Callable

import uvicorn
from fastapi import FastAPI
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.config import ConfigError, Settings
from aimem_common.errors import UnavailableError
from aimem_common.telemetry import Telemetry, setup_logging, setup_tracing

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
    await busmod.ensure_streams(nc.jetstream(), settings.bus)
    return nc, busmod.Bus(nc, settings.bus, telemetry.registry)


async def close_nats(nc: NATS) -> None:
    """Drain a connected client; close one that is reconnecting (drain would raise then).

    Use as the lifespan's teardown so a service stops cleanly while NATS is down.
    """
    if nc.is_connected:
        await nc.drain()
    elif not nc.is_closed:
        await nc.close()


def run_service(service: str, settings: Settings, app_factory: Callable[[Settings], FastAPI]) -> None:
    """Run ``service`` under uvicorn on ``settings.host:port(service)`` (blocking).

    Sets up JSON logs and tracing first; logs the absolute data dir loudly.
    """
    setup_logging(service, settings.log_level)
    setup_tracing(service, settings.otlp_endpoint)
    check_bind(settings, settings.host)
    log.info("starting aimem-%s on %s:%d, data dir %s", service, settings.host, settings.port(service), settings.data_dir)
    app = app_factory(settings)
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
        uvicorn.run(app, host=settings.host, port=settings.port(service), log_config=None, access_log=False,
                    lifespan="on", timeout_graceful_shutdown=5)
    except SystemExit:
        if failed:
            raise failed[0] from None
        raise
    if failed:
        raise failed[0]


CONFIG_ERROR_EXIT = 2  # `aimem up` does not restart a service that exits with this


def main_entry(service: str, app_factory: Callable[[Settings], FastAPI]) -> None:
    """``python -m aimem_<service>``: load config once and run; config errors exit 2
    (``CONFIG_ERROR_EXIT``), whether found while loading or during start-up."""
    import sys

    from aimem_common import config

    try:
        settings = config.load()
        run_service(service, settings, app_factory)
    except ConfigError as exc:
        print(f"aimem-{service}: {exc.message}", file=sys.stderr)
        sys.exit(CONFIG_ERROR_EXIT)
