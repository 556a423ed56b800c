"""``session.end``: rule-based summary page, automatic handoff, the ended watermark.

One transaction (DESIGN.md "Hook ingress"): ``sessions/<session_id>.md`` synthesised from
the observations (no LLM, ``session_page``: the task, commands and how they ended, files
changed, errors with their meaningful line, the final message; the page ≤ 16 KiB), an
automatic handoff for the next agent in that project (what was done, changed, failed, and
what is next), ``ended_at`` + ``ended_observation_count``, a consolidation job for the
maintainer and a ledger line. A re-end does work only when the observation count advanced;
a session with nothing but start/end events (and no prompt on its start) gets no page and
no handoff.
"""

from __future__ import annotations

import re

from aimem_common.errors import NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.observations import SessionEnd

from aimem_writer.ops.observations import ledger_entry, occurred
from aimem_writer.page_store import PageInput
from aimem_writer.session_page import digest, render_handoff, render_page
from aimem_writer.registry import handler
from aimem_writer.tx import Tx

BOUNDARY_KINDS = ("session-start", "session-end")


def session_slug(session_id: str) -> str:
    """Return a path-safe file stem for a session id."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", session_id).strip(".-")[:200]
    return slug or "session"


def _end_reason(rows) -> str | None:
    """The client's reason on the last session-end event (``Session end (exit)`` -> ``exit``)."""
    for r in reversed(rows):
        if r["kind"] == "session-end":
            m = re.match(r"Session end \((.+)\)$", r["title"] or "")
            return m.group(1) if m else None
    return None


def _substantive(rows) -> list:
    """Observations worth a page: all but start/end, plus a start that carries a prompt."""
    return [r for r in rows if r["kind"] not in BOUNDARY_KINDS or (r["kind"] == "session-start"
                                                                    and (r["body"] or "").strip())]


@handler("session.end")
def session_end(tx: Tx, env: Envelope, cmd: SessionEnd) -> dict:
    """End a session. Result ``{ended, changed, observation_count, page_id, path, handoff_id}``."""
    scope = tx.scope(create=True)
    row = tx.conn.execute(
        "SELECT * FROM sessions WHERE project_id = ? AND session_id = ?", (scope.project_id, cmd.session_id)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {cmd.session_id!r} has no observations in {scope.workspace}/{scope.project}",
                            code="session_not_found", data={"session_id": cmd.session_id})
    count = row["observation_count"]
    if row["ended_observation_count"] is not None and count <= row["ended_observation_count"]:
        return {"ended": True, "changed": False, "observation_count": count,
                "page_id": row["summary_page_id"], "path": None, "handoff_id": None}
    ended_at = occurred(tx, cmd.ended_at)
    rows = tx.conn.execute(
        "SELECT kind, agent, title, body, tool_name, cwd FROM observations WHERE project_id = ? AND session_id = ?"
        " ORDER BY id", (scope.project_id, cmd.session_id),
    ).fetchall()
    substantive = _substantive(rows)
    page_id = handoff_id = path = None
    if substantive:
        roots = session_roots(tx, scope, row)
        reason = _end_reason(rows)
        d = digest(substantive, roots)
        path = f"sessions/{session_slug(cmd.session_id)}.md"
        title, body = render_page(cmd.session_id, row, d, ended_at, count, roots, reason)
        fm = {"session_id": cmd.session_id, "agent": row["agent"], "cwd": row["cwd"],
              "started_at": row["started_at"], "ended_at": ended_at, "observation_count": count,
              "tags": ["session"]}
        res = tx.pages.write(scope, PageInput(path=path, body=body, title=title, frontmatter=fm),
                             evidence=[{"kind": "session", "id": cmd.session_id}], session_id=cmd.session_id)
        page_id = res["page_id"]
        handoff = render_handoff(cmd.session_id, row, d, path, roots, reason)
        handoff_id = _automatic_handoff(tx, scope, cmd, row, handoff)
    tx.conn.execute(
        "UPDATE sessions SET ended_at = ?, ended_observation_count = ?, summary_page_id = coalesce(?, summary_page_id)"
        " WHERE id = ?", (ended_at, count, page_id, row["id"]),
    )
    if substantive:
        tx.conn.execute(
            "INSERT OR IGNORE INTO session_consolidation_jobs(workspace_id, project_id, session_id, generation,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (scope.workspace_id, scope.project_id, cmd.session_id, count, tx.now, tx.now),
        )
    tx.wiki.append_ledger(scope, ended_at[:7], ledger_entry(
        ended_at, "session-end", cmd.agent, cmd.session_id,
        f"ended after {count} events" + (f"; summary {path}" if path else "")))
    tx.audit("session.end", cmd.session_id, {"observation_count": count, "page_id": page_id,
                                             "handoff_id": handoff_id}, scope=scope)
    tx.emit("session.ended", {"workspace_id": scope.workspace_id, "project_id": scope.project_id,
                              "session_id": cmd.session_id, "generation": count, "page_id": page_id,
                              "path": path, "handoff_id": handoff_id})
    return {"ended": True, "changed": True, "observation_count": count, "page_id": page_id, "path": path,
            "handoff_id": handoff_id}


def session_roots(tx: Tx, scope, row) -> list[str]:
    """Directories the session page's paths are relative to: the session's cwd."""
    return [row["cwd"]] if row["cwd"] else []


def _automatic_handoff(tx: Tx, scope, cmd: SessionEnd, row, handoff: tuple[str, str]) -> int:
    """Open (or refresh, on a re-end) this session's automatic handoff; returns its id."""
    from aimem_writer.ops.handoffs import norm_cwd

    title, body = handoff
    cwd = norm_cwd(cmd.cwd or row["cwd"])
    existing = tx.conn.execute(
        "SELECT id FROM handoffs WHERE project_id = ? AND from_session_id = ? AND automatic = 1 AND status = 'open'",
        (scope.project_id, cmd.session_id),
    ).fetchone()
    if existing:
        tx.conn.execute("UPDATE handoffs SET title = ?, body = ?, cwd = ?, created_at = ? WHERE id = ?",
                        (title, body, cwd, tx.now, existing["id"]))
        return existing["id"]
    hid = tx.conn.execute(
        "INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent, from_session_id, cwd,"
        " title, body, status, created_at) VALUES (?, ?, 1, 0, ?, ?, ?, ?, ?, ?, 'open', ?)",
        (scope.workspace_id, scope.project_id, tx.actor, cmd.agent or row["agent"], cmd.session_id, cwd,
         title, body, tx.now),
    ).lastrowid
    tx.emit("handoff.opened", {"handoff_id": hid, "automatic": True, "cwd": cwd})
    return hid
