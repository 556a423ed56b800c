"""The ingress service context: what the lifespan builds once and every route receives."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from aimem_common.db.connect import open_reader
from aimem_common.errors import UnavailableError
from aimem_common.service import ServiceContext
from aimem_common.telemetry import Telemetry
from aimem_ingress.gate import LagGate

log = logging.getLogger("aimem.ingress")
T = TypeVar("T")


class HookMetrics:
    """The hook families of DESIGN.md "Observability" in the service's registry."""

    def __init__(self, telemetry: Telemetry):
        self.events = telemetry.counter(
            "aimem_hook_events_total", "Hook events accepted (202) by agent and kind", ["agent", "kind"])
        self.responses = telemetry.counter(
            "aimem_hook_responses_total", "POST /hook responses by HTTP status", ["status"])
        self.latency = telemetry.histogram(
            "aimem_hook_request_duration_seconds", "POST /hook latency in seconds by HTTP status",
            ["status"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))
        self.contexts = telemetry.counter(
            "aimem_hook_contexts_total", "Session-start contexts served by outcome",
            ["outcome"])  # handoff | brief | empty


@dataclass(slots=True, kw_only=True)
class IngressContext(ServiceContext):
    """Dependencies of the ingress routes (built in the lifespan, on ``app.state.ctx``).

    The read-only DB is opened lazily on the first context request: hooks must be accepted
    (JetStream buffers them) even before a writer has ever created the database.
    """

    gate: LagGate
    metrics: HookMetrics
    claim_timeout_s: float = 0.8
    _db: sqlite3.Connection | None = None
    _db_lock: threading.Lock = field(default_factory=threading.Lock)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T | None:
        """Run ``fn(conn)`` on a worker thread with the read-only connection.

        Returns None (logged) when the database does not exist yet.
        """
        def run() -> T | None:
            with self._db_lock:
                if self._db is None:
                    try:
                        self._db = open_reader(self.settings.db_path, wait_s=0)
                    except UnavailableError as exc:
                        log.info("read-only DB not ready: %s", exc.message)
                        return None
                return fn(self._db)

        return await asyncio.to_thread(run)

    @property
    def db_open(self) -> bool:
        return self._db is not None

    async def health(self) -> dict:
        """``nats`` connected; ``db`` ``open`` or ``lazy`` (never a failure: hooks are buffered);
        the last ``writer_lag`` read."""
        return {"nats": self.nc.is_connected, "db": "open" if self.db_open else "lazy", "writer_lag": self.gate.lag}

    def close(self) -> None:
        with self._db_lock:
            if self._db is not None:
                self._db.close()
                self._db = None
