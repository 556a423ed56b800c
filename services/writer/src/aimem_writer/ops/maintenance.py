"""Handlers of the maintainer's ops (payloads in ``aimem_common.commands.maintenance``).

Writer thread, inside the batch transaction and the command's SAVEPOINT: a raised
``AimemError`` rolls the whole command back, so a sweep, a consolidation completion or a
proposal approval is all-or-nothing. The maintainer computes the page ids; these handlers
re-check each id against the current rows and report the ones that changed as ``skipped``.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.models import Scope
from aimem_common.commands import Envelope
from aimem_common.commands.maintenance import (
    AutoImproveClaim,
    AutoImproveWatermark,
    ConsolidationComplete,
    ConsolidationEnqueue,
    ConsolidationFail,
    ConsolidationLease,
    EmbeddingUpsert,
    ProposalApprove,
    ProposalReject,
    ProposalStage,
    SweepApply,
)

from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.tombstones import refuse
from aimem_writer.tx import Tx


def _plus_seconds(iso: str, seconds: float) -> str:
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return dt.isoformat().replace("+00:00", "Z")


# -- forget sweep ------------------------------------------------------------------------


@handler("sweep.apply")
def sweep_apply(tx: Tx, env: Envelope, cmd: SweepApply) -> dict[str, Any]:
    scope = tx.scope()
    out: dict[str, Any] = {"expired": [], "evicted": [], "purged": [], "purged_rows": 0,
                           "observations_pruned": 0, "skipped": []}

    def live_row(page_id: int):
        return tx.conn.execute(
            "SELECT id, path FROM pages WHERE id = ? AND project_id = ? AND is_latest = 1",
            (page_id, scope.project_id),
        ).fetchone()

    for pid in cmd.expire_page_ids:  # TTL beats pinning: file and every version row go
        row = live_row(pid)
        if row is None:
            out["skipped"].append(pid)
            continue
        tx.pages.delete(scope, row["path"], reason="expired")
        n = tx.conn.execute(
            "DELETE FROM pages WHERE project_id = ? AND path = ? AND id <= ? AND is_latest = 0",
            (scope.project_id, row["path"], pid),
        ).rowcount
        out["expired"].append(pid)
        out["purged_rows"] += n
    for pid in cmd.evict_page_ids:
        row = live_row(pid)
        if row is None:
            out["skipped"].append(pid)
            continue
        tx.pages.delete(scope, row["path"], reason="evicted")  # the retired row is the tombstone
        out["evicted"].append(pid)
    for pid in cmd.purge_page_ids:
        row = tx.conn.execute(
            "SELECT id, path FROM pages WHERE id = ? AND project_id = ? AND is_latest = 0 AND retired_reason = 'evicted'",
            (pid, scope.project_id),
        ).fetchone()
        if row is None:
            out["skipped"].append(pid)
            continue
        # The tombstone and its ancestry; a newer version at the path (recreated) survives.
        n = tx.conn.execute(
            "DELETE FROM pages WHERE project_id = ? AND path = ? AND id <= ? AND is_latest = 0",
            (scope.project_id, row["path"], pid),
        ).rowcount
        out["purged"].append(pid)
        out["purged_rows"] += n
    if out["purged_rows"]:
        tx.conn.execute(
            "DELETE FROM entities WHERE project_id = ? AND id NOT IN (SELECT entity_id FROM entity_page_links)",
            (scope.project_id,),
        )
    if cmd.prune_observations_before and cmd.prune_session_ids:
        budget = cmd.prune_batch
        for sid in cmd.prune_session_ids:
            if budget <= 0:
                break
            live_summary = tx.conn.execute(
                "SELECT 1 FROM sessions s JOIN pages p ON p.id = s.summary_page_id AND p.is_latest = 1 "
                "WHERE s.project_id = ? AND s.session_id = ?",
                (scope.project_id, sid),
            ).fetchone()
            if live_summary is None:
                continue  # the raw capture is the last copy of this session's work
            n = tx.conn.execute(
                "DELETE FROM observations WHERE id IN (SELECT id FROM observations WHERE project_id = ? "
                "AND session_id = ? AND julianday(occurred_at) < julianday(?) ORDER BY id LIMIT ?)",
                (scope.project_id, sid, cmd.prune_observations_before, budget),
            ).rowcount
            if n:
                tx.conn.execute(
                    "UPDATE sessions SET observation_count = max(0, observation_count - ?), "
                    "ended_observation_count = CASE WHEN ended_observation_count IS NULL THEN NULL "
                    "ELSE max(0, ended_observation_count - ?) END WHERE project_id = ? AND session_id = ?",
                    (n, n, scope.project_id, sid),
                )
            budget -= n
            out["observations_pruned"] += n
    if cmd.prune_ledgers:
        out["ledgers_pruned"] = _prune_ledgers(tx, scope, cmd.prune_ledgers)
    tx.audit("sweep.apply", None, {k: (len(v) if isinstance(v, list) else v) for k, v in out.items()}, scope=scope)
    return out


def ledger_floor(now_iso: str) -> str:
    """``YYYY-MM`` of the previous month at ``now_iso``: ledgers of it and later are never pruned."""
    y, m = int(now_iso[:4]), int(now_iso[5:7])
    y, m = (y - 1, 12) if m == 1 else (y, m - 1)
    return f"{y:04d}-{m:02d}"


def _prune_ledgers(tx: Tx, scope: Scope, names: list[str]) -> list[str]:
    """Delete the scope's monthly ledgers ``names`` that exist and are older than the previous
    month (a late or clock-skewed plan never reaches the current or previous month)."""
    floor = ledger_floor(tx.now)
    done = []
    for name in sorted(set(names)):
        if name[4:11] >= floor:
            continue
        rel = f"{scope.workspace_id}/{scope.project_id}/{name}"
        if (tx.wiki.root / rel).is_file():
            tx.wiki.delete_rel(rel)
            done.append(name)
    return done


# -- consolidation queue -----------------------------------------------------------------


@handler("consolidation.enqueue")
def consolidation_enqueue(tx: Tx, env: Envelope, cmd: ConsolidationEnqueue) -> dict[str, Any]:
    if refuse(tx, cmd.session_id, tx.now) is not None:  # a late session.ended of a purged session
        return {"job_id": None, "created": False, "skipped": "purged"}
    scope = tx.scope()
    cur = tx.conn.execute(
        "INSERT INTO session_consolidation_jobs(workspace_id, project_id, session_id, generation, status, attempts,"
        " next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?)"
        " ON CONFLICT(project_id, session_id, generation) DO NOTHING",
        (scope.workspace_id, scope.project_id, cmd.session_id, cmd.generation, tx.now, tx.now, tx.now),
    )
    created = cur.rowcount == 1
    row = tx.conn.execute(
        "SELECT id FROM session_consolidation_jobs WHERE project_id = ? AND session_id = ? AND generation = ?",
        (scope.project_id, cmd.session_id, cmd.generation),
    ).fetchone()
    if created:
        tx.audit("consolidation.enqueue", cmd.session_id, {"job_id": row["id"], "generation": cmd.generation},
                 scope=scope)
    return {"job_id": row["id"] if row else None, "created": created}


@handler("consolidation.lease")
def consolidation_lease(tx: Tx, env: Envelope, cmd: ConsolidationLease) -> dict[str, Any]:
    now = tx.now
    # Expired leases that already used every attempt are parked, not handed out again.
    tx.conn.execute(
        "UPDATE session_consolidation_jobs SET status = 'parked', lease_owner = NULL, lease_until = NULL,"
        " last_error = coalesce(last_error, 'lease expired'), updated_at = ? WHERE status = 'leased'"
        " AND julianday(lease_until) < julianday(?) AND attempts >= ?",
        (now, now, cmd.max_attempts),
    )
    rows = tx.conn.execute(
        "SELECT j.*, w.name AS workspace, p.name AS project FROM session_consolidation_jobs j"
        " JOIN projects p ON p.id = j.project_id JOIN workspaces w ON w.id = j.workspace_id"
        " WHERE (j.status = 'pending' AND (j.next_attempt_at IS NULL OR julianday(j.next_attempt_at) <= julianday(?)))"
        " OR (j.status = 'leased' AND julianday(j.lease_until) < julianday(?))"
        " ORDER BY coalesce(j.next_attempt_at, j.created_at), j.id LIMIT ?",
        (now, now, cmd.limit),
    ).fetchall()
    until = _plus_seconds(now, cmd.lease_ttl_s)
    jobs = []
    for r in rows:
        tx.conn.execute(
            "UPDATE session_consolidation_jobs SET status = 'leased', lease_owner = ?, lease_until = ?,"
            " attempts = attempts + 1, updated_at = ? WHERE id = ?",
            (cmd.owner, until, now, r["id"]),
        )
        jobs.append({"id": r["id"], "workspace_id": r["workspace_id"], "project_id": r["project_id"],
                     "workspace": r["workspace"], "project": r["project"], "session_id": r["session_id"],
                     "generation": r["generation"], "attempts": r["attempts"] + 1, "lease_until": until,
                     "recovered": r["status"] == "leased"})
    return {"jobs": jobs}


def _leased_job(tx: Tx, job_id: int, owner: str):
    row = tx.conn.execute("SELECT * FROM session_consolidation_jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"consolidation job {job_id} not found", data={"job_id": job_id})
    if row["status"] != "leased" or row["lease_owner"] != owner:
        raise ConflictError(
            f"consolidation job {job_id} is not leased by {owner}",
            code="lease_lost", data={"job_id": job_id, "status": row["status"]},
        )
    return row


@handler("consolidation.complete")
def consolidation_complete(tx: Tx, env: Envelope, cmd: ConsolidationComplete) -> dict[str, Any]:
    job = _leased_job(tx, cmd.job_id, cmd.owner)
    scope = tx.scope_by_ids(job["workspace_id"], job["project_id"])
    written = []
    cite = {"kind": "session", "id": job["session_id"]}
    for page in cmd.pages:
        res = tx.pages.write(scope, page, evidence=[] if cite in page.evidence else [cite])
        written.append({"path": res["path"], "page_id": res["page_id"], "changed": res.get("changed", True)})
    tx.conn.execute(
        "UPDATE session_consolidation_jobs SET status = 'done', lease_owner = NULL, lease_until = NULL,"
        " last_error = NULL, updated_at = ? WHERE id = ?",
        (tx.now, job["id"]),
    )
    tx.audit("consolidation.complete", job["session_id"], {"job_id": job["id"], "pages": written}, scope=scope)
    tx.emit("consolidation.done", {"workspace": scope.workspace, "project": scope.project,
                                   "session_id": job["session_id"], "job_id": job["id"],
                                   "pages": [w["path"] for w in written]})
    return {"job_id": job["id"], "pages": written}


@handler("consolidation.fail")
def consolidation_fail(tx: Tx, env: Envelope, cmd: ConsolidationFail) -> dict[str, Any]:
    job = _leased_job(tx, cmd.job_id, cmd.owner)
    attempts = job["attempts"] if cmd.count_attempt else max(0, job["attempts"] - 1)
    park = cmd.park or (cmd.count_attempt and attempts >= cmd.max_attempts)
    status = "parked" if park else "pending"
    tx.conn.execute(
        "UPDATE session_consolidation_jobs SET status = ?, lease_owner = NULL, lease_until = NULL,"
        " attempts = ?, next_attempt_at = ?, last_error = ?, updated_at = ? WHERE id = ?",
        (status, attempts, None if park else (cmd.retry_at or tx.now), cmd.error[:2000], tx.now, job["id"]),
    )
    scope = tx.scope_by_ids(job["workspace_id"], job["project_id"])
    tx.audit("consolidation.fail", job["session_id"],
             {"job_id": job["id"], "status": status, "attempts": attempts, "error": cmd.error[:300]},
             scope=scope)
    return {"job_id": job["id"], "status": status, "attempts": attempts}


# -- auto-improve ------------------------------------------------------------------------


@handler("auto_improve.watermark")
def auto_improve_watermark(tx: Tx, env: Envelope, cmd: AutoImproveWatermark) -> dict[str, Any]:
    scope = tx.scope()
    created = tx.conn.execute(
        "INSERT INTO auto_improve_state(project_id, watermark_at) VALUES (?, ?) ON CONFLICT(project_id) DO NOTHING",
        (scope.project_id, cmd.watermark_at),
    ).rowcount == 1
    row = tx.conn.execute("SELECT watermark_at FROM auto_improve_state WHERE project_id = ?",
                          (scope.project_id,)).fetchone()
    return {"watermark_at": row["watermark_at"], "created": created}


@handler("auto_improve.claim")
def auto_improve_claim(tx: Tx, env: Envelope, cmd: AutoImproveClaim) -> dict[str, Any]:
    if refuse(tx, cmd.session_id, tx.now) is not None:  # purged: never reviewed
        return {"claimed": False, "skipped": "purged"}
    scope = tx.scope()
    claimed = tx.conn.execute(
        "INSERT INTO auto_improve_runs(workspace_id, project_id, session_id, status, created_at)"
        " VALUES (?, ?, ?, 'claimed', ?) ON CONFLICT(project_id, session_id) DO NOTHING",
        (scope.workspace_id, scope.project_id, cmd.session_id, tx.now),
    ).rowcount == 1
    if not claimed and cmd.rerun:
        tx.conn.execute(
            "UPDATE auto_improve_runs SET status = 'claimed', detail = NULL, created_at = ?"
            " WHERE project_id = ? AND session_id = ?",
            (tx.now, scope.project_id, cmd.session_id),
        )
        claimed = True
    return {"claimed": claimed}


def _live_id(tx: Tx, scope: Scope, path: str) -> int | None:
    row = tx.pages.get(scope, path)
    return int(row["id"]) if row is not None else None


def _apply_proposal(tx: Tx, scope: Scope, prop: dict[str, Any]) -> int:
    evidence = [{"kind": "session", "id": prop["session_id"]}] if prop.get("session_id") else []
    res = tx.pages.write(
        scope,
        PageInput(path=prop["path"], body=prop["body"], title=prop.get("title"),
                  frontmatter=json.loads(prop.get("frontmatter") or "{}")),
        evidence=evidence,
    )
    return int(res["page_id"])


@handler("proposal.stage")
def proposal_stage(tx: Tx, env: Envelope, cmd: ProposalStage) -> dict[str, Any]:
    if refuse(tx, cmd.session_id, tx.now) is not None:  # purged while the LLM ran: its output is dropped
        return {"proposals": [], "skipped": "purged"}
    scope = tx.scope()
    out = []
    for p in cmd.proposals:
        pid = tx.conn.execute(
            "INSERT INTO auto_improve_proposals(workspace_id, project_id, session_id, path, title, body, frontmatter,"
            " rationale, confidence, target_page_id, status, actor, created_at, patch, eval)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, cmd.session_id, p.path, p.title, p.body,
             json.dumps({"source": "auto_improve"}), p.rationale, p.confidence, p.target_page_id, "pending",
             tx.actor, tx.now, _patch_json(p.patch), json.dumps(p.eval) if p.eval is not None else None),
        ).lastrowid
        status, applied = "pending", None
        # Auto-approve only when the target is still what the reviewer saw.
        if cmd.approve and _live_id(tx, scope, p.path) == p.target_page_id:
            row = dict(tx.conn.execute("SELECT * FROM auto_improve_proposals WHERE id = ?", (pid,)).fetchone())
            applied = _apply_proposal(tx, scope, row)
            status = "approved"
            tx.conn.execute(
                "UPDATE auto_improve_proposals SET status = 'approved', decided_at = ?, decided_by = ?,"
                " applied_page_id = ? WHERE id = ?",
                (tx.now, tx.actor, applied, pid),
            )
        out.append({"id": pid, "path": p.path, "status": status, "applied_page_id": applied})
    refused = []
    for r in cmd.rejected:  # kept visible (and given back to the next review), never written
        rid = tx.conn.execute(
            "INSERT INTO auto_improve_proposals(workspace_id, project_id, session_id, path, title, body, frontmatter,"
            " rationale, confidence, target_page_id, status, actor, created_at, decided_at, decided_by, patch,"
            " reject_stage, reject_reason, eval) VALUES (?,?,?,?,?,?,?,?,?,?,'rejected',?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, cmd.session_id, r.path, r.title, r.body,
             json.dumps({"source": "auto_improve"}), r.rationale, r.confidence, r.target_page_id, tx.actor, tx.now,
             tx.now, r.stage, _patch_json(r.patch), r.stage, r.reason,
             json.dumps(r.eval) if r.eval is not None else None),
        ).lastrowid
        refused.append({"id": rid, "path": r.path, "stage": r.stage, "reason": r.reason})
    if cmd.session_id:
        tx.conn.execute(
            "INSERT INTO auto_improve_runs(workspace_id, project_id, session_id, status, detail, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(project_id, session_id) DO UPDATE SET status = excluded.status,"
            " detail = excluded.detail",
            (scope.workspace_id, scope.project_id, cmd.session_id, cmd.run_status, cmd.run_detail, tx.now),
        )
    tx.audit("proposal.stage", cmd.session_id, {"proposals": out, "rejected": refused, "run_status": cmd.run_status},
             scope=scope)
    if out:
        tx.emit("proposals.staged", {"session_id": cmd.session_id, "proposals": out})
    return {"proposals": out, "rejected": refused}


def _patch_json(patch: list[Any]) -> str | None:
    return json.dumps([e.model_dump() for e in patch]) if patch else None


def _pending(tx: Tx, ids: list[int]) -> list[dict[str, Any]]:
    rows = []
    for pid in ids:
        row = tx.conn.execute("SELECT * FROM auto_improve_proposals WHERE id = ?", (pid,)).fetchone()
        if row is None:
            raise NotFoundError(f"proposal {pid} not found", data={"id": pid})
        if env_scope_mismatch(tx, row):
            raise NotFoundError(f"proposal {pid} not found in this project", data={"id": pid})
        if row["status"] != "pending":
            raise ConflictError(f"proposal {pid} is already {row['status']}", data={"id": pid, "status": row["status"]})
        rows.append(dict(row))
    return rows


def env_scope_mismatch(tx: Tx, row: Any) -> bool:
    """True when the envelope names a scope other than the proposal's."""
    if tx.env.scope is None:
        return False
    scope = tx.scope()
    return scope.project_id != row["project_id"]


@handler("proposal.approve")
def proposal_approve(tx: Tx, env: Envelope, cmd: ProposalApprove) -> dict[str, Any]:
    out = []
    for row in _pending(tx, cmd.ids):
        scope = tx.scope_by_ids(row["workspace_id"], row["project_id"])
        live = _live_id(tx, scope, row["path"])
        if live != row["target_page_id"]:
            raise ConflictError(
                f"proposal {row['id']}: {row['path']} changed since it was proposed; reject it and re-run",
                code="stale_proposal", data={"id": row["id"], "current_page_id": live},
            )
        applied = _apply_proposal(tx, scope, row)
        tx.conn.execute(
            "UPDATE auto_improve_proposals SET status = 'approved', decided_at = ?, decided_by = ?, applied_page_id = ?"
            " WHERE id = ?",
            (tx.now, tx.actor, applied, row["id"]),
        )
        tx.audit("proposal.approve", row["path"], {"id": row["id"], "page_id": applied}, scope=scope)
        out.append({"id": row["id"], "path": row["path"], "status": "approved", "applied_page_id": applied})
    return {"proposals": out}


@handler("proposal.reject")
def proposal_reject(tx: Tx, env: Envelope, cmd: ProposalReject) -> dict[str, Any]:
    out = []
    for row in _pending(tx, cmd.ids):
        scope = tx.scope_by_ids(row["workspace_id"], row["project_id"])
        tx.conn.execute(
            "UPDATE auto_improve_proposals SET status = 'rejected', decided_at = ?, decided_by = ?,"
            " reject_stage = 'operator', reject_reason = ? WHERE id = ?",
            (tx.now, tx.actor, cmd.reason, row["id"]),
        )
        tx.audit("proposal.reject", row["path"], {"id": row["id"], "reason": cmd.reason}, scope=scope)
        out.append({"id": row["id"], "path": row["path"], "status": "rejected", "applied_page_id": None})
    return {"proposals": out}


# -- embeddings --------------------------------------------------------------------------


def _b64(text: str) -> bytes:
    """Decoded base64, or b"" when malformed (the item is then skipped as a wrong size)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return b""


@handler("embedding.upsert")
def embedding_upsert(tx: Tx, env: Envelope, cmd: EmbeddingUpsert) -> dict[str, Any]:
    upserted, skipped = 0, []
    for item in cmd.items:
        page = tx.conn.execute(
            "SELECT workspace_id, project_id, content_hash FROM pages WHERE id = ? AND is_latest = 1", (item.page_id,)
        ).fetchone()
        raw = _b64(item.vector_b64)
        chunks = [_b64(c) for c in item.chunks]
        if (page is None or page["content_hash"] != item.content_hash or len(raw) != cmd.dim * 4
                or any(len(c) != cmd.dim * 4 for c in chunks)):
            skipped.append(item.page_id)
            continue
        if chunks:
            tx.conn.execute("DELETE FROM page_chunk_embeddings WHERE page_id = ?", (item.page_id,))
            tx.conn.executemany(
                "INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector, content_hash,"
                " created_at) VALUES (?,?,?,?,?,?,?,?)",
                [(item.page_id, i, cmd.provider, cmd.model, cmd.dim, c, item.content_hash, tx.now)
                 for i, c in enumerate(chunks)],
            )
        tx.conn.execute(
            "INSERT INTO page_embeddings(page_id, workspace_id, project_id, provider, model, dim, vector, content_hash,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(page_id) DO UPDATE SET provider = excluded.provider,"
            " model = excluded.model, dim = excluded.dim, vector = excluded.vector,"
            " content_hash = excluded.content_hash, created_at = excluded.created_at",
            (item.page_id, page["workspace_id"], page["project_id"], cmd.provider, cmd.model, cmd.dim, raw,
             item.content_hash, tx.now),
        )
        upserted += 1
    return {"upserted": upserted, "skipped": skipped}

