"""The maintainer service app: schedules, the consolidation queue, on-demand jobs over NATS.

The lifespan builds one ``MaintContext`` (bus, read-only store, optional LLM chain and
embedder) and starts, each as a background task stopped and awaited on shutdown:

* ``rpc.serve``: ``aimem.maint.<job>`` request/reply handlers;
* schedules (``scheduler.run_schedule``): sweep, lint, embedding backfill (with an
  embedder), auto-improve (with an LLM and ``[auto_improve.scheduler] enabled``), each over
  every workspace/project, under a NATS KV lease;
* with an LLM and ``[consolidation] enabled``: the ``session.ended`` event feed and the
  consolidation worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.embed import build_embedder
from aimem_common.service import close_nats, connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_guard, install_observability

from aimem_maintainer import auto_improve, embeddings, lint, rpc, sweep
from aimem_maintainer.consolidate import EventFeed, Worker
from aimem_maintainer.context import MaintContext
from aimem_maintainer.llm import LlmClient, build_candidates
from aimem_maintainer.metrics import MaintMetrics
from aimem_maintainer.scheduler import Leases, Schedule, run_schedule
from aimem_maintainer.store import ReadStore, list_scopes

log = logging.getLogger("aimem.maintainer")


def _every_scope(ctx: MaintContext, job: str, fn) -> Any:
    async def tick() -> dict[str, Any]:
        async with ctx.job(job) as info:
            scopes = await ctx.store.run(list_scopes)
            done, failed = 0, 0
            for scope in scopes:
                try:
                    await fn(scope)
                    done += 1
                except Exception as exc:  # noqa: BLE001 - one bad project must not stop the others
                    failed += 1
                    log.warning("%s of %s/%s failed: %s", job, scope.workspace, scope.project, exc)
            if failed:
                info["outcome"] = "partial"
            return {"outcome": info["outcome"], "scopes": done, "failed": failed}

    return tick


def build_schedules(ctx: MaintContext) -> list[Schedule]:
    """The enabled schedules for this configuration."""
    m = ctx.settings.maintenance
    out = [
        Schedule("sweep", m.sweep_interval_s, _every_scope(ctx, "sweep", lambda s: sweep.run_sweep(ctx, s, dry_run=False))),
        Schedule("lint", m.lint_interval_s, _every_scope(ctx, "lint", lambda s: lint.run_lint(ctx, s))),
    ]
    if ctx.embedder is not None:
        async def embed_tick() -> dict[str, Any]:
            async with ctx.job("embed"):
                return await embeddings.backfill(ctx)

        out.append(Schedule("embed", m.embed_interval_s, embed_tick))
    ai = ctx.settings.auto_improve
    if ctx.llm is not None and ai.scheduler.enabled:
        out.append(Schedule("auto_improve", ai.scheduler.interval_secs,
                            _every_scope(ctx, "auto_improve", lambda s: auto_improve.tick_scope(ctx, s))))
    return out


def create_app(settings: Settings) -> FastAPI:
    """Build the maintainer app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("maintainer")
    metrics = MaintMetrics.create(telemetry)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            candidates = build_candidates(settings)  # ConfigError fails startup, not the first call
            llm = LlmClient(candidates, metrics, max_output_tokens=settings.consolidation.max_output_tokens,
                            cooldown_s=settings.llm.circuit_cooldown_s) if candidates else None
            if llm is not None:
                stack.push_async_callback(llm.aclose)
            embedder = build_embedder(settings.embedding, api_key_fallback=settings.llm.api_key,
                                      models_dir=settings.data_dir / "models")
            if embedder is not None:
                stack.push_async_callback(embedder.aclose)
            nc, bus = await connect_bus(settings, "maintainer", telemetry)
            stack.push_async_callback(close_nats, nc)
            store = ReadStore(settings.db_path)
            await store.run(lambda conn: conn.execute("SELECT 1").fetchone())  # waits for the writer's schema
            ctx = MaintContext(settings=settings, bus=bus, store=store, metrics=metrics, llm=llm, embedder=embedder)
            state.update(nc=nc, ctx=ctx)
            app.state.ctx = ctx
            stop = asyncio.Event()
            tasks: list[asyncio.Task] = []

            async def shutdown() -> None:
                stop.set()
                for t in tasks:
                    t.cancel()
                for t in tasks:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await t

            stack.push_async_callback(shutdown)
            await rpc.serve(ctx)
            leases = await Leases.open(bus.js, ctx.owner, settings.maintenance.lease_ttl_s)
            started = time.time()
            for sched in build_schedules(ctx):
                tasks.append(asyncio.create_task(run_schedule(sched, leases, stop, started_at=started),
                                                 name=f"schedule-{sched.name}"))
            if llm is not None and settings.consolidation.enabled:
                worker = Worker(ctx)
                feed = EventFeed(ctx, worker)
                ready = asyncio.Event()
                tasks.append(asyncio.create_task(feed.run(stop, ready), name="consolidation-feed"))
                tasks.append(asyncio.create_task(worker.run(stop), name="consolidation-worker"))
                await asyncio.wait_for(ready.wait(), 10)
            log.info("maintainer up: llm=%s embedder=%s schedules=%s", bool(llm),
                     embedder.identity if embedder else None, [s.name for s in build_schedules(ctx)])
            yield

    async def health() -> dict:
        nc = state.get("nc")
        return {"nats": bool(nc and nc.is_connected), "db": "ctx" in state}

    app = FastAPI(title="aimem-maintainer", lifespan=lifespan)
    install_error_handlers(app)
    install_guard(app, settings.allowed_hosts, settings.host)
    install_observability(app, telemetry, health)
    return app
