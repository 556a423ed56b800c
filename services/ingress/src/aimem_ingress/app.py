"""The ingress service app: ``POST /hook``, session-start context, health and metrics.

Run with ``python -m aimem_ingress`` (``config.load()`` once, then uvicorn). The lifespan
connects to NATS (ensuring the streams), builds the ``IngressContext`` (bus, lag gate,
metrics, the lazy read pool) on ``app.state.ctx`` and starts the first writer-lag read; routes
live in ``routes.py`` and reach the context through ``deps.py``.
"""

from __future__ import annotations

from functools import partial

from aimem_common.bundles import Gatherer
from aimem_common.bus import BULK, WRITER_STATUS_SUBJECT
from aimem_common.config import Settings
from aimem_common.service import Startup, create_service_app
from aimem_common.telemetry import Telemetry, tracing_enabled
from aimem_common.http import ServiceApp
from aimem_ingress.context import HookMetrics, IngressContext
from aimem_ingress.backfills import router as backfill_router
from aimem_ingress.gate import LagGate
from aimem_ingress.imports import router as import_router
from aimem_ingress.importwork import ImportWorkers
from aimem_ingress.purged import PurgedSessions
from aimem_ingress.routes import post_hook, router
from aimem_ingress.workstreams import router as workstream_router

READ_POOL_SIZE = 2  # session-start briefs read concurrently; hooks themselves never read
BUNDLE_MAX_BYTES = 1024 * 1024  # JSON bytes of gathered hooks in one message


def create_app(settings: Settings) -> ServiceApp:
    """Build the ingress app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("ingress")
    metrics = HookMetrics(telemetry)

    async def start(s: Startup) -> IngressContext:
        nc, bus = await s.connect_bus()
        cfg = settings.ingress
        gate = LagGate(bus.writer_progress, max_lag=cfg.max_writer_lag, max_delay_s=cfg.max_writer_delay_s,
                       interval_s=cfg.lag_check_interval_s, retry_after_s=cfg.retry_after_s,
                       status_stale_s=cfg.writer_status_stale_s)
        # Live first: imports have their own gate on the bulk lane's backlog; the hooks' gate
        # counts only the live lane, so an import never turns a hook into a 429.
        import_gate = LagGate(partial(bus.writer_progress, BULK), max_lag=cfg.max_writer_lag,
                              max_delay_s=cfg.max_import_delay_s, interval_s=cfg.lag_check_interval_s,
                              retry_after_s=cfg.retry_after_s, status_stale_s=cfg.writer_status_stale_s)
        for g in (gate, import_gate):
            await nc.subscribe(WRITER_STATUS_SUBJECT, cb=g.on_writer_status)
            await g.refresh()
            g.start()
            s.stack.push_async_callback(g.close)
        imports = ImportWorkers()  # live first: import batches are read in their own process (started
        s.stack.callback(imports.close)  # by the first batch: a stack that never imports runs none)
        pool = await s.read_pool(size=READ_POOL_SIZE, budget_ms=settings.query.query_budget_ms, wait_s=0, lazy=True)
        # Traced, every hook travels alone: one trace per hook from ingress to git commit.
        hooks = Gatherer(bus, max_cmds=1 if tracing_enabled() else cfg.bundle_max_cmds,
                         max_bytes=min(settings.bus.mut_max_msg_bytes // 2, BUNDLE_MAX_BYTES),
                         max_inflight=cfg.bundle_max_inflight, enabled=gate.writer_reads_bundles)
        purged = PurgedSessions(pool, bus)  # 410 for purged sessions: re-read every second
        purged.start()
        s.stack.push_async_callback(purged.close)
        return IngressContext(settings=settings, telemetry=telemetry, nc=nc, bus=bus, gate=gate,
                              import_gate=import_gate, imports=imports, metrics=metrics, read_pool=pool, hooks=hooks,
                              purged=purged,
                              claim_timeout_s=min(settings.bus.publish_timeout_s, 0.8))

    app = create_service_app("ingress", settings, telemetry, start,
                             not_ready={"nats": False, "db": "lazy", "writer_lag": None})
    app.add_lean_route("/hook", post_hook)  # the hot path: the same guards, not the framework's layers
    app.include_router(router)
    app.include_router(import_router)
    app.include_router(workstream_router)
    app.include_router(backfill_router)
    return app
