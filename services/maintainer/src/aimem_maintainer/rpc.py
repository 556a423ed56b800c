"""On-demand jobs over NATS request/reply (``aimem_common.maint_rpc`` is the contract).

Each ``aimem.maint.<job>`` subject is subscribed in the queue group ``aimem-maintainer`` so
one replica answers. Requests ``{workspace, project, actor, args}``; replies ``{ok,
result|error}``. Every handler runs in its own task, so a slow LLM job does not hold up a
``status`` request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aimem_common import maint_rpc
from aimem_common.bus import make_reply
from aimem_common.errors import AimemError, BadRequestError, NotFoundError
from aimem_common.models import Scope, validate_name
from aimem_common.read import proposals, scopes

from aimem_maintainer import (auto_improve, bootstrap, consolidate, curator, embeddings, explore, idle, lint,
                              llm_rerank, sweep)
from aimem_maintainer.store import parse_time

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

log = logging.getLogger("aimem.maintainer.rpc")

Handler = Callable[["MaintContext", dict[str, Any]], Awaitable[dict[str, Any]]]


async def _scope(ctx: "MaintContext", req: dict[str, Any], *, required: bool = True) -> Scope | None:
    project = req.get("project")
    if not project:
        if required:
            raise BadRequestError("this job needs a project", code="missing_scope")
        return None
    ws = validate_name(req.get("workspace") or ctx.settings.workspace_default, "workspace")
    validate_name(project, "project")
    scope = await ctx.read_pool.run(lambda conn: scopes.find(conn, ws, project))
    if scope is None:
        raise NotFoundError(f"project {ws}/{project} not found", data={"workspace": ws, "project": project})
    return scope


async def _scopes(ctx: "MaintContext", req: dict[str, Any]) -> list[Scope]:
    one = await _scope(ctx, req, required=False)
    return [one] if one else await ctx.read_pool.run(scopes.all_scopes)


async def h_sweep(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    dry = bool(req["args"].get("dry_run", False))
    # ``as_of`` evaluates decay at another instant ("what goes in 30 days?"); default now.
    as_of = parse_time(req["args"].get("as_of")) if req["args"].get("as_of") else None
    if req["args"].get("as_of") and as_of is None:
        raise BadRequestError("as_of must be an ISO-8601 time")
    async with ctx.job("sweep" if not dry else "sweep_dry_run"):
        results = [await sweep.run_sweep(ctx, s, dry_run=dry, now=as_of) for s in await _scopes(ctx, req)]
    return results[0] if req.get("project") and results else {"dry_run": dry, "scopes": results}


async def h_lint(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    write = bool(req["args"].get("write", True))
    async with ctx.job("lint"):
        results = [await lint.run_lint(ctx, s, write=write) for s in await _scopes(ctx, req)]
    return results[0] if req.get("project") and results else {"scopes": results}


async def h_consolidate(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    ctx.require_llm("consolidate")
    scope = await _scope(ctx, req)
    args = req["args"]
    # ``multi_page`` absent (CLI, admin) keeps the fan-out; the MCP tool sends its own default.
    return await consolidate.consolidate_now(ctx, scope, args.get("session_id"), args.get("instructions"),
                                             multi_page=bool(args.get("multi_page", True)))


async def h_auto_improve(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    ctx.require_llm("auto_improve")
    scope = await _scope(ctx, req)
    return await auto_improve.run_manual(ctx, scope, req["args"].get("session_id"), req["actor"])


async def h_auto_improve_report(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    stage = bool(req["args"].get("stage", False))
    results = [await auto_improve.run_report(ctx, s, stage=stage) for s in await _scopes(ctx, req)]
    return results[0] if req.get("project") and results else {"scopes": results}


async def h_curator(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    write = bool(req["args"].get("write", True))
    async with ctx.job("curator"):
        results = [await curator.run_curator(ctx, s, write=write) for s in await _scopes(ctx, req)]
    return results[0] if req.get("project") and results else {"scopes": results}


async def h_explore(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    scope = await _scope(ctx, req)
    return await explore.explore(ctx, scope, req["args"].get("focus"))


async def h_rerank(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    args = req["args"]
    return await llm_rerank.rank(ctx, str(args.get("query") or ""), list(args.get("documents") or []),
                                 budget_s=float(args.get("budget_s") or 10.0))


async def h_bootstrap(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    return await bootstrap.introduce(ctx, req["args"].get("overview"))


async def h_embed(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    async with ctx.job("embed"):
        return await embeddings.backfill(ctx, await _scope(ctx, req, required=False))


async def h_status(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    ident = ctx.embedder.identity if ctx.embedder else None
    cov = await ctx.read_pool.run(lambda conn: embeddings.coverage(conn, ident))
    jobs = await ctx.read_pool.run(lambda conn: {r[0]: r[1] for r in conn.execute(
        "SELECT status, count(*) FROM session_consolidation_jobs GROUP BY status")})
    return {
        "owner": ctx.owner,
        "llm": {"configured": ctx.llm is not None,
                "provider": ctx.settings.llm.provider, "model": ctx.settings.llm.model},
        "llm_candidates": ctx.llm.status() if ctx.llm and len(ctx.llm.candidates) > 1 else [],
        "llm_candidate_status": ctx.llm.status() if ctx.llm else [],
        "mirrors": [m.status() for m in ctx.mirrors],
        "embedding": {"configured": ident is not None,
                      **({"provider": ident.provider, "model": ident.model, "dim": ident.dim} if ident else {}),
                      **cov},
        "consolidation_jobs": jobs,
        "last_runs": ctx.last_runs,
    }


async def h_pending(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    args = req["args"]
    action = args.get("action", "list")
    if action == "list":
        scope = await _scope(ctx, req, required=False)
        status = args.get("status", "pending")
        rows = await ctx.read_pool.run(lambda conn: proposals.list_proposals(
            conn, scope.project_id if scope else None, status or None, int(args.get("limit", 100))))
        return {"proposals": rows}
    if action not in ("approve", "reject"):
        raise BadRequestError(f"unknown pending_writes action {action!r}: use list|approve|reject")
    ids = [int(i) for i in args.get("ids") or []]
    if not ids:
        raise BadRequestError("pending_writes approve/reject needs ids")
    scope = await _scope(ctx, req, required=False)
    payload: dict[str, Any] = {"ids": ids}
    if action == "reject" and args.get("reason"):
        payload["reason"] = str(args["reason"])[:2000]
    return await ctx.send(f"proposal.{action}", payload, scope, actor=req["actor"])


async def h_finalize_idle(ctx: "MaintContext", req: dict[str, Any]) -> dict[str, Any]:
    raw = req["args"].get("idle_after_s")
    try:
        after = float(raw) if raw is not None else None
    except (TypeError, ValueError):
        after = None
    if raw is not None and (after is None or after <= 0):
        raise BadRequestError("idle_after_s must be a positive number of seconds")
    async with ctx.job("finalize_idle"):
        return await idle.finalize_idle(ctx, idle_after_s=after)


HANDLERS: dict[str, Handler] = {
    "forget_sweep": h_sweep, "lint": h_lint, "consolidate": h_consolidate, "auto_improve": h_auto_improve,
    "explore": h_explore, "bootstrap": h_bootstrap, "embed": h_embed, "status": h_status, "pending_writes": h_pending,
    "finalize_idle": h_finalize_idle, "rerank": h_rerank, "auto_improve_report": h_auto_improve_report,
    "curator": h_curator,
}


async def serve(ctx: "MaintContext") -> list[Any]:
    """Subscribe every job subject (queue group); return the subscriptions."""
    nc = ctx.bus.nc
    tasks: set[asyncio.Task] = set()
    subs = []
    for job, fn in HANDLERS.items():
        async def on_msg(msg, fn=fn, job=job) -> None:
            async def work() -> None:
                try:
                    req = maint_rpc.parse_request(msg.data)
                    result = await fn(ctx, req)
                    data = make_reply(result=result)
                except AimemError as exc:
                    data = make_reply(error=exc)
                except Exception as exc:  # noqa: BLE001 - answer instead of leaving the caller hanging
                    log.exception("maint job %s failed", job)
                    data = make_reply(error=AimemError(f"{job} failed: {type(exc).__name__}"))
                if msg.reply:
                    await nc.publish(msg.reply, data)

            t = asyncio.create_task(work())
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        subs.append(await nc.subscribe(maint_rpc.subject(job), queue=maint_rpc.QUEUE_GROUP, cb=on_msg))
    return subs
