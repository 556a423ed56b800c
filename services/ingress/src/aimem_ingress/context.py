"""The ingress service context: what the lifespan builds once and every route receives."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aimem_common.bundles import Gatherer
from aimem_common.errors import UnavailableError
from aimem_common.readpool import ReaderPool
from aimem_common.service import ServiceContext
from aimem_common.telemetry import Telemetry
from aimem_ingress.gate import LagGate
from aimem_ingress.purged import PurgedSessions

if TYPE_CHECKING:  # importwork imports the routes, which import this module
    from aimem_ingress.importwork import ImportWorkers

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
        self.purged = telemetry.counter(
            "aimem_hook_purged_refused_total", "Hook and import events refused for a purged session (410)",
            ["route"])  # hook | import


@dataclass(slots=True, kw_only=True)
class IngressContext(ServiceContext):
    """Dependencies of the ingress routes (built in the lifespan, on ``app.state.ctx``).

    ``read_pool`` opens its read-only connections lazily (``wait_s=0``): hooks must be
    accepted (JetStream buffers them) even before a writer has ever created the database.
    """

    gate: LagGate  # the live lane: hooks, session-start claims
    import_gate: LagGate  # the bulk lane: POST /hook/import (its own backlog bound, never the hooks')
    imports: ImportWorkers  # the process(es) that read import batches off the live loop
    metrics: HookMetrics
    read_pool: ReaderPool
    hooks: Gatherer  # the hook commands' publisher: concurrent hooks share a JetStream message
    purged: PurgedSessions  # session ids answered 410 (live purge tombstones)
    claim_timeout_s: float = 0.8

    async def read(self, fn: Callable[..., T], /, *args: Any) -> T | None:
        """Run ``fn(conn, *args)`` on ``read_pool``; ``None`` (logged) when it cannot answer.

        A missing or not-yet-migrated database (``db_not_ready``) or a read past the pool's
        budget (``query_timeout``) only leaves the session-start context without its brief
        (or an import batch unclassified: every event is sent).
        """
        try:
            return await self.read_pool.run(fn, *args)
        except UnavailableError as exc:
            log.info("read skipped (%s): %s", getattr(fn, "__name__", "read"), exc.message)
            return None

    async def health(self) -> dict[str, Any]:
        """``nats`` connected; ``db`` ``open`` or ``lazy`` (never a failure: hooks are buffered);
        the last ``writer_lag`` read; ``jetstream`` and ``writer_store`` red while either
        cannot store."""
        fault = self.gate.store_fault()
        return {"nats": self.nc.is_connected, "db": "open" if self.read_pool.opened else "lazy",
                # False while JetStream leaves publishes unacknowledged (its store failed).
                "jetstream": self.bus.jetstream_storing(),
                "writer_lag": self.gate.lag, "writer_delay_s": round(self.gate.delay_s, 1),
                "import_lag": self.import_gate.lag, "import_delay_s": round(self.import_gate.delay_s, 1),
                # Red while the writer reports it cannot store: hooks get 507/503, not a 202.
                "writer_store": {"ok": False, **fault} if fault else True}
