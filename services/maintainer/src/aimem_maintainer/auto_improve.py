"""Auto-improve: per-session LLM review → validated proposals for an operator to approve.

Scheduled ticks review, per project, completed sessions that ended after the project's
first-run watermark (set on the first tick, so history is not reprocessed on upgrade), are
old enough, long enough and have enough observations, and have no run yet. Each session is
*claimed* before any LLM work, so a failing review is recorded and never retried forever.
Proposals are validated (allowed directories, confidence, sizes, count) and staged in
``auto_improve_proposals``; they are written through the normal page path at once unless
``[auto_improve] require_approval = true``, which leaves them pending for
``pending-writes approve|reject``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aimem_common.errors import AimemError, NotFoundError
from aimem_common.commands.maintenance import ProposalIn
from aimem_common.models import Scope

from aimem_maintainer.consolidate import gather
from aimem_maintainer.llm import fence
from aimem_maintainer.store import live_page

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext


class ProposalOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="concepts/, decisions/, gotchas/, procedures/ or _rules/ page path ending in .md")
    title: str
    body: str = Field(description="the complete new markdown body of the page")
    rationale: str
    confidence: float = Field(description="0..1")


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    proposals: list[ProposalOut]


SYSTEM = (
    "You review a finished AI coding-agent session and propose durable improvements to the "
    "project's wiki: reusable procedures, project rules (_rules/), decisions, gotchas and "
    "concepts that a future agent needs. Propose nothing when the session taught nothing "
    "reusable. Each proposal is the complete page body; to edit an existing page reuse its "
    "path. Give an honest confidence between 0 and 1."
)


def candidate_sessions(conn: sqlite3.Connection, scope: Scope, *, watermark: str, now: datetime,
                       cfg: Any, limit: int) -> list[str]:
    """Sessions of ``scope`` eligible for a scheduled review, oldest first."""
    max_end = (now - timedelta(seconds=cfg.scheduler.min_session_age_secs)).isoformat()
    rows = conn.execute(
        "SELECT s.session_id FROM sessions s WHERE s.project_id = ? AND s.ended_at IS NOT NULL"
        " AND julianday(s.ended_at) > julianday(?) AND julianday(s.ended_at) <= julianday(?)"
        " AND s.observation_count >= ? AND (julianday(s.ended_at) - julianday(s.started_at)) * 86400 >= ?"
        " AND NOT EXISTS (SELECT 1 FROM auto_improve_runs r WHERE r.project_id = s.project_id"
        " AND r.session_id = s.session_id) ORDER BY s.ended_at LIMIT ?",
        (scope.project_id, watermark, max_end, cfg.min_observations, cfg.min_session_duration_secs, limit),
    ).fetchall()
    return [r[0] for r in rows]


def validate_proposals(conn: sqlite3.Connection, scope: Scope, review: Review, cfg: Any
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the model's proposals into accepted ``ProposalIn`` dicts and rejected ones."""
    accepted, rejected = [], []
    for p in review.proposals:
        reason = None
        if p.confidence < cfg.min_confidence:
            reason = f"confidence {p.confidence:.2f} < {cfg.min_confidence}"
        elif len(p.body) > cfg.max_final_body_chars:
            reason = f"body over {cfg.max_final_body_chars} chars"
        elif len(accepted) >= cfg.max_proposals_per_run:
            reason = "over max_proposals_per_run"
        if reason is None:
            try:
                path = p.path.strip().lstrip("/")
                row = live_page(conn, scope.project_id, path)
                prop = ProposalIn(path=path, title=p.title[:512], body=p.body, rationale=p.rationale[:4000],
                                  confidence=p.confidence, target_page_id=row["id"] if row else None)
                accepted.append(prop.model_dump())
                continue
            except (ValidationError, AimemError) as exc:
                reason = f"invalid: {str(exc).splitlines()[0][:200]}"
        rejected.append({"path": p.path, "reason": reason})
    return accepted, rejected


async def review_session(ctx: "MaintContext", scope: Scope, session_id: str, *, rerun: bool,
                         actor: str | None = None) -> dict[str, Any]:
    """Claim, review and stage one session. Returns ``{session_id, claimed, proposals, rejected}``."""
    llm = ctx.require_llm("auto_improve")
    cfg = ctx.settings.auto_improve
    claim = await ctx.send("auto_improve.claim", {"session_id": session_id, "rerun": rerun}, scope, actor=actor)
    if not claim.get("claimed"):
        return {"session_id": session_id, "claimed": False, "proposals": [], "rejected": []}
    actor = actor or cfg.proposal_actor
    try:
        material = await ctx.read_pool.run(lambda conn: gather(
            conn, scope, session_id, budget_chars=cfg.max_input_tokens * 4, related_k=8))
        user = (f"Session id: {json.dumps(session_id)}\n\n"
                + ("Session summary page:\n" + fence("session_page", material["session_page"]) + "\n\n"
                   if material["session_page"] else "")
                + "Observations:\n" + fence("observations", material["observations"]) + "\n\n"
                + "Existing related pages:\n" + fence("related_pages", material["related"]))
        review = await llm.structured(Review, name="auto_improve_review", system=SYSTEM, user=user)
        accepted, rejected = await ctx.read_pool.run(lambda conn: validate_proposals(conn, scope, review, cfg))
    except AimemError as exc:
        await ctx.send("proposal.stage", {"session_id": session_id, "proposals": [], "run_status": "failed",
                                          "run_detail": f"{exc.code}: {exc.message}"[:2000]}, scope, actor=actor)
        raise
    res = await ctx.send("proposal.stage", {
        "session_id": session_id, "proposals": accepted, "approve": not cfg.require_approval,
        "run_status": "done" if accepted else "skipped",
        "run_detail": json.dumps({"accepted": len(accepted), "rejected": rejected})[:2000],
    }, scope, actor=actor)
    return {"session_id": session_id, "claimed": True, "proposals": res.get("proposals", []), "rejected": rejected,
            "require_approval": cfg.require_approval}


async def tick_scope(ctx: "MaintContext", scope: Scope, now: datetime | None = None) -> dict[str, Any]:
    """One scheduled pass over ``scope``: watermark, then up to ``max_sessions_per_tick`` reviews."""
    now = now or datetime.now(UTC)
    cfg = ctx.settings.auto_improve
    wm = await ctx.send("auto_improve.watermark", {"watermark_at": now.isoformat()}, scope)
    if wm.get("created"):
        return {"watermark_at": wm["watermark_at"], "reviewed": []}
    sessions = await ctx.read_pool.run(lambda conn: candidate_sessions(
        conn, scope, watermark=wm["watermark_at"], now=now, cfg=cfg, limit=cfg.scheduler.max_sessions_per_tick))
    reviewed = []
    for sid in sessions:
        try:
            reviewed.append(await review_session(ctx, scope, sid, rerun=False))
        except AimemError as exc:
            reviewed.append({"session_id": sid, "error": exc.to_dict()})
    return {"watermark_at": wm["watermark_at"], "reviewed": reviewed}


async def run_manual(ctx: "MaintContext", scope: Scope, session_id: str | None, actor: str) -> dict[str, Any]:
    """Explicit ``auto-improve`` (CLI/admin/MCP): a given session (rerunnable) or the newest
    completed one without a run."""
    ctx.require_llm("auto_improve")
    async with ctx.job("auto_improve"):
        rerun = session_id is not None
        if session_id is None:
            session_id = await ctx.read_pool.run(lambda conn: _newest_unreviewed(conn, scope))
            if session_id is None:
                raise NotFoundError("no completed session without an auto-improve run", data={"workspace": scope.workspace, "project": scope.project})
        return await review_session(ctx, scope, session_id, rerun=rerun, actor=actor)


def _newest_unreviewed(conn: sqlite3.Connection, scope: Scope) -> str | None:
    r = conn.execute(
        "SELECT s.session_id FROM sessions s WHERE s.project_id = ? AND s.ended_at IS NOT NULL AND NOT EXISTS"
        " (SELECT 1 FROM auto_improve_runs r WHERE r.project_id = s.project_id AND r.session_id = s.session_id)"
        " ORDER BY s.ended_at DESC LIMIT 1",
        (scope.project_id,),
    ).fetchone()
    return r[0] if r else None


