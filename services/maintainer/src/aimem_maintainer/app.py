"""The maintainer service app: schedules, the consolidation queue, on-demand jobs over NATS.

The lifespan builds one ``MaintContext`` (bus, read pool, optional LLM chain and
embedder) and starts, each as a background task stopped and awaited on shutdown:

* ``rpc.serve``: ``aimem.maint.<job>`` request/reply handlers;
* schedules (``scheduler.run_schedule``): sweep, lint, idle-session finalisation
  (``idle.py``), embedding backfill (with an
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
from typing import Any

from fastapi import FastAPI

from aimem_common.config import Settings
from aimem_common.embed import build_embedder
from aimem_common.read import scopes
from aimem_common.service import Startup, create_service_app
from aimem_common.telemetry import Telemetry

from aimem_maintainer import auto_improve, embeddings, idle, lint, rpc, sweep
from aimem_maintainer.consolidate import EventFeed, Worker
from aimem_maintainer.mirrors import build_senders
from aimem_maintainer.context import MaintContext
from aimem_maintainer.llm import LlmClient, build_candidates
from aimem_maintainer.metrics import MaintMetrics
from aimem_maintainer.scheduler import Leases, Schedule, run_schedule

log = logging.getLogger("aimem.maintainer")

READ_POOL_SIZE = 4  # concurrent job reads (each on a worker thread)
READ_BUDGET_MS = 60_000  # a sweep or lint read of a whole project; past this it is interrupted


def _every_scope(ctx: MaintContext, job: str, fn) -> Any:
    async def tick() -> dict[str, Any]:
        async with ctx.job(job) as info:
            every = await ctx.read_pool.run(scopes.all_scopes)
            done, failed = 0, 0
            for scope in every:
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


async def _finalize_idle(ctx: MaintContext) -> dict[str, Any]:
    async with ctx.job("finalize_idle"):
        return await idle.finalize_idle(ctx)


def build_schedules(ctx: MaintContext) -> list[Schedule]:
    """The enabled schedules for this configuration."""
    m = ctx.settings.maintenance
    out = [
        Schedule("sweep", m.sweep_interval_s, _every_scope(ctx, "sweep", lambda s: sweep.run_sweep(ctx, s, dry_run=False))),
        Schedule("lint", m.lint_interval_s, _every_scope(ctx, "lint", lambda s: lint.run_lint(ctx, s))),
        Schedule("finalize_idle", m.idle_check_interval_s, lambda: _finalize_idle(ctx)),
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

    async def start(s: Startup) -> MaintContext:
        stack = s.stack
        candidates = build_candidates(settings)  # ConfigError fails startup, not the first call
        llm = LlmClient(candidates, metrics, max_output_tokens=settings.consolidation.max_output_tokens,
                        cooldown_s=settings.llm.circuit_cooldown_s,
                        compat_strict=settings.llm.compat_strict) if candidates else None
        if llm is not None:
            stack.push_async_callback(llm.aclose)
        embedder = build_embedder(settings.embedding, api_key_fallback=settings.llm.api_key,
                                  models_dir=settings.data_dir / "models")
        if embedder is not None:
            stack.push_async_callback(embedder.aclose)
        nc, bus = await s.connect_bus()
        pool = await s.read_pool(size=READ_POOL_SIZE, budget_ms=READ_BUDGET_MS)  # waits for the writer's schema
        ctx = MaintContext(settings=settings, telemetry=telemetry, nc=nc, bus=bus, read_pool=pool, metrics=metrics,
                           llm=llm, embedder=embedder)
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
        schedules = build_schedules(ctx)
        for sched in schedules:
            tasks.append(asyncio.create_task(run_schedule(sched, leases, stop, started_at=started),
                                             name=f"schedule-{sched.name}"))
        if llm is not None and settings.consolidation.enabled:
            worker = Worker(ctx)
            feed = EventFeed(ctx, worker)
            ready = asyncio.Event()
            tasks.append(asyncio.create_task(feed.run(stop, ready), name="consolidation-feed"))
            tasks.append(asyncio.create_task(worker.run(stop), name="consolidation-worker"))
            await asyncio.wait_for(ready.wait(), 10)
        for sender in build_senders(ctx):  # [[mirrors]]: zero-LLM, independent of the rest
            ctx.mirrors.append(sender)
            ready = asyncio.Event()
            tasks.append(asyncio.create_task(sender.run(stop, ready), name=f"{sender.name}"))
            await asyncio.wait_for(ready.wait(), 10)
        log.info("maintainer up: llm=%s embedder=%s schedules=%s", bool(llm),
                 embedder.identity if embedder else None, [sc.name for sc in schedules])
        return ctx

    return create_service_app("maintainer", settings, telemetry, start, not_ready={"nats": False, "db": False})
