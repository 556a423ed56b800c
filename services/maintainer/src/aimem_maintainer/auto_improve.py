"""Auto-improve: per-session LLM review → bounded patches, validated and gated, then staged.

Scheduled ticks review, per project, completed sessions that ended after the project's
first-run watermark (set on the first tick, so history is not reprocessed on upgrade), are
old enough, long enough and have enough observations, and have no run yet. Each session is
*claimed* before any LLM work, so a failing review is recorded and never retried forever.
Proposals are patches of one page each (``aimem_maintainer.patches``), validated (allowed
directories, confidence, the patch applying exactly, the review's limits on pages, edits and
changed characters), then passed through the ``[auto_improve.eval]`` gate when their prefix is
gated, and staged in ``auto_improve_proposals``. Refused ones are staged as ``rejected`` rows
with their reason and given back to the model in the next review (the rejection buffer).
Accepted ones are written through the normal page path at once unless ``[auto_improve]
require_approval = true``, which leaves them pending for ``pending-writes approve|reject``.
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
from aimem_common.read import proposals

from aimem_maintainer import patches
from aimem_maintainer.consolidate import gather
from aimem_maintainer.llm import fence
from aimem_maintainer.store import live_page

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext


class EditOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    find: str = Field(description="exact text of the current page, occurring once; empty only for a new page")
    replace: str = Field(description="the text that replaces it (for a new page: its whole body)")


class ProposalOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="concepts/, decisions/, gotchas/, procedures/ or _rules/ page path ending in .md")
    title: str
    edits: list[EditOut] = Field(description="a patch: small find/replace edits of the existing page, or one edit"
                                             " with an empty find holding the body of a new page")
    rationale: str
    confidence: float = Field(description="0..1")


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    proposals: list[ProposalOut]


SYSTEM = (
    "You review a finished AI coding-agent session and propose durable improvements to the "
    "project's wiki: reusable procedures, project rules (_rules/), decisions, gotchas and "
    "concepts that a future agent needs. Propose nothing when the session taught nothing "
    "reusable. Each proposal is a small patch of one page: find/replace edits whose find text "
    "is copied exactly from the existing page (it must occur once); a new page is one edit with "
    "an empty find. Never rewrite a whole existing page. Keep patches few and short: there are "
    "limits on pages, edits and changed characters. Proposals listed as rejected before were "
    "refused for the reason given: do not propose them again unless that reason no longer "
    "holds. Give an honest confidence between 0 and 1."
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
    """Split the model's patches into ``ProposalIn`` dicts (body = patch applied to the live
    page) and ``RejectedProposalIn`` dicts (stage ``validation`` with the reason).

    Checks, in order: confidence, the path (allowed directories), the patch applying exactly
    to the live body, the review's limits (pages, edits, changed characters), the final size.
    """
    accepted: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    budget = patches.Budget(cfg)
    for p in review.proposals:
        edits = [e.model_dump() for e in p.edits][:100]
        path = p.path.strip().lstrip("/")
        base_row, body, reason = None, "", None
        if p.confidence < cfg.min_confidence:
            reason = f"confidence {p.confidence:.2f} < {cfg.min_confidence}"
        if reason is None:
            try:
                ProposalIn(path=path, body="x", confidence=min(max(p.confidence, 0.0), 1.0))
            except ValidationError as exc:
                reason = f"invalid: {exc.errors()[0]['msg'][:200]}"
        if reason is None:
            base_row = live_page(conn, scope.project_id, path)
            try:
                body = patches.apply_patch(base_row["body"] if base_row else None, edits)
            except patches.PatchError as exc:
                reason = f"patch does not apply: {exc}"
        if reason is None:
            reason = budget.take(edits)
        if reason is None and len(body) > cfg.max_final_body_chars:
            reason = f"body over {cfg.max_final_body_chars} chars"
        if reason is None:
            try:
                prop = ProposalIn(path=path, title=p.title[:512], body=body, rationale=p.rationale[:4000],
                                  confidence=p.confidence, target_page_id=base_row["id"] if base_row else None,
                                  patch=edits)
                accepted.append(prop.model_dump())
                continue
            except (ValidationError, AimemError) as exc:
                reason = f"invalid: {str(exc).splitlines()[0][:200]}"
        rejected.append({"path": p.path[:1024], "title": p.title[:512], "body": body[:64 * 1024],
                         "rationale": p.rationale[:4000],
                         "confidence": p.confidence, "target_page_id": base_row["id"] if base_row else None,
                         "patch": edits, "stage": "validation", "reason": reason[:2000]})
    return accepted, rejected


async def gate(ctx: "MaintContext", scope: Scope, session_id: str, accepted: list[dict[str, Any]],
               rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the ``[auto_improve.eval]`` executable on each gated proposal; return the ones it
    accepts (with its answer in ``eval``), moving the others to ``rejected`` (stage ``eval``)."""
    cfg = ctx.settings.auto_improve.eval
    kept = []
    for prop in accepted:
        if not patches.gated(cfg, prop["path"]):
            kept.append(prop)
            continue
        before = None
        if prop["target_page_id"] is not None:
            before = await ctx.read_pool.run(lambda conn, i=prop["target_page_id"]: conn.execute(
                "SELECT body FROM pages WHERE id = ?", (i,)).fetchone()[0])
        answer = await patches.run_eval(cfg, {
            "workspace": scope.workspace, "project": scope.project, "session_id": session_id, "path": prop["path"],
            "title": prop["title"], "before": before, "after": prop["body"], "patch": prop["patch"],
            "rationale": prop["rationale"], "confidence": prop["confidence"]})
        ctx.metrics.auto_improve_eval.labels(outcome="accept" if answer["accept"] else "reject").inc()
        prop = {**prop, "eval": answer}
        if answer["accept"]:
            kept.append(prop)
        else:
            rejected.append({**prop, "stage": "eval", "reason": answer["reason"][:2000]})
    return kept


async def review_session(ctx: "MaintContext", scope: Scope, session_id: str, *, rerun: bool,
                         actor: str | None = None) -> dict[str, Any]:
    """Claim, review, validate, gate and stage one session.

    Returns ``{session_id, claimed, proposals: [{id, path, status, applied_page_id}],
    rejected: [{id, path, stage, reason}], require_approval}``.
    """
    llm = ctx.require_llm("auto_improve")
    cfg = ctx.settings.auto_improve
    claim = await ctx.send("auto_improve.claim", {"session_id": session_id, "rerun": rerun}, scope, actor=actor)
    if not claim.get("claimed"):
        return {"session_id": session_id, "claimed": False, "proposals": [], "rejected": []}
    actor = actor or cfg.proposal_actor
    try:
        material = await ctx.read_pool.run(lambda conn: gather(
            conn, scope, session_id, budget_chars=cfg.max_input_tokens * 4, related_k=8))
        refused = await ctx.read_pool.run(lambda conn: proposals.recent_rejections(
            conn, scope.project_id, cfg.rejection_context))
        user = (f"Session id: {json.dumps(session_id)}\n\n"
                + ("Session summary page:\n" + fence("session_page", material["session_page"]) + "\n\n"
                   if material["session_page"] else "")
                + "Observations:\n" + fence("observations", material["observations"]) + "\n\n"
                + "Existing related pages:\n" + fence("related_pages", material["related"])
                + ("\n\nProposals rejected before (path, who refused, why):\n"
                   + fence("rejected_proposals", refused) if refused else ""))
        review = await llm.structured(Review, name="auto_improve_review", system=SYSTEM, user=user)
        accepted, rejected = await ctx.read_pool.run(lambda conn: validate_proposals(conn, scope, review, cfg))
        accepted = await gate(ctx, scope, session_id, accepted, rejected)
    except AimemError as exc:
        await ctx.send("proposal.stage", {"session_id": session_id, "proposals": [], "run_status": "failed",
                                          "run_detail": f"{exc.code}: {exc.message}"[:2000]}, scope, actor=actor)
        raise
    res = await ctx.send("proposal.stage", {
        "session_id": session_id, "proposals": accepted, "rejected": rejected, "approve": not cfg.require_approval,
        "run_status": "done" if accepted else "skipped",
        "run_detail": json.dumps({"accepted": len(accepted),
                                  "rejected": [{"path": r["path"], "stage": r["stage"], "reason": r["reason"]}
                                               for r in rejected]})[:2000],
    }, scope, actor=actor)
    return {"session_id": session_id, "claimed": True, "proposals": res.get("proposals", []),
            "rejected": res.get("rejected", []), "require_approval": cfg.require_approval}


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




REPORT_PATH = "_lint/auto-improve-report.md"


def render_report(scope: Scope, rep: dict[str, Any]) -> str:
    """Markdown body of the auto-improve report page (deterministic for one state: it shows
    stored times only, never the time of rendering)."""
    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"

    lines = [f"# Auto-improve report: {scope.workspace}/{scope.project}", "",
             f"- reviews: {counts(rep['runs'])}", f"- proposals: {counts(rep['proposals'])}",
             f"- rejected by: {counts(rep['rejected_by'])}",
             "- acceptance: " + ("n/a" if rep["acceptance"] is None else f"{rep['acceptance']:.0%}"),
             f"- history before: {rep['watermark_at'] or 'not started'}", ""]
    if rep["recent"]:
        lines += ["## Recent proposals", ""]
        for r in rep["recent"]:
            why = f" ({r['reject_stage']}: {r['reject_reason']})" if r["status"] == "rejected" else ""
            lines.append(f"- #{r['id']} {r['status']} `{r['path']}`: {r['edits']} edit(s), "
                         f"{r['changed_chars']} chars{why}")
    return "\n".join(lines) + "\n"


async def run_report(ctx: "MaintContext", scope: Scope, *, stage: bool = False) -> dict[str, Any]:
    """``auto-improve-report``: what auto-improve did in ``scope`` (``proposals.report``),
    read-only; with ``stage`` also write it as one page, ``_lint/auto-improve-report.md``
    (``report: {path, page_id, changed}`` in the result)."""
    rep = await ctx.read_pool.run(lambda conn: proposals.report(conn, scope.project_id))
    out: dict[str, Any] = {"workspace": scope.workspace, "project": scope.project, **rep}
    if stage:
        res = await ctx.send("page.write", {
            "path": REPORT_PATH, "title": f"Auto-improve report {scope.project}", "body": render_report(scope, rep),
            "frontmatter": {"generated_by": "aimem-maintainer"}}, scope)
        out["report"] = {"path": REPORT_PATH, "page_id": res.get("page_id"), "changed": res.get("changed")}
    return out
