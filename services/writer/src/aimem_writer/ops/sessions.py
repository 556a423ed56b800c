"""``session.end``: rule-based summary page, automatic handoff, the ended watermark.

One transaction (DESIGN.md "Hook ingress"): ``sessions/<session_slug(id)>.md`` (the id
itself when it is a safe file stem, else its safe form plus a hash: one page per distinct
id; an earlier page of the session at another stem is retired) synthesised from
the observations (no LLM, ``session_page``: the task, commands and how they ended, files
changed, errors with their meaningful line, how the session ended, the final message; the
page ≤ 16 KiB, paths relative to the repository root), an automatic handoff for the next
agent in that project root (else cwd) saying what was done, changed, failed and what is
next, ``ended_at`` + ``ended_observation_count`` + ``end_reason``, a consolidation job for
the maintainer and a ledger line. A re-end (a resumed session ending again, by its client or
the idle finaliser) does work only when the observation count advanced, and rewrites the
page. A session with nothing but start/end events (and no prompt on its start, no transcript
tail on its end) gets no page; one without a prompt, a tool call or a finished turn opens no
handoff and gives back the handoff it claimed. A ``historical`` end (``aimem import``) keeps
the transcript's own end time, marks the page ``imported`` and opens no handoff; it changes
nothing for a session hooks captured live (``skipped: "captured_live"``: live capture wins).
"""

from __future__ import annotations

import hashlib
import re

from aimem_common.errors import NotFoundError
from aimem_common.models import windows_unsafe
from aimem_common.sanitize import storable
from aimem_common.commands import Envelope
from aimem_common.commands.observations import SessionEnd

from aimem_writer.ops.observations import ledger_entry, occurred
from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.session_page import digest, render_handoff, render_page
from aimem_writer.tombstones import refuse
from aimem_writer.tx import Tx

BOUNDARY_KINDS = ("session-start", "session-end")
# A session did real work when one of these happened: a prompt, a tool call, a finished turn.
# Without one it leaves no handoff and gives back the one it claimed.
REAL_KINDS = frozenset(("user-prompt", "pre-tool-use", "post-tool-use", "stop"))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
SLUG_HASH_CHARS = 10  # hex chars of sha256(session id): 40 bits, per project


def session_slug(session_id: str) -> str:
    """Return the file stem of ``session_id``'s page (``sessions/<stem>.md``): stable, path-safe,
    and distinct for distinct ids.

    An id that is already a safe stem (``[A-Za-z0-9._-]``, not starting or ending in ``.``/``-``,
    ≤ 200 chars, not a Windows device name such as ``CON``: every UUID-like client id) is its own
    stem, so existing pages keep their paths.
    Any other id gets its safe form (unsafe runs → ``-``, cut to 200 chars; ``session`` when
    nothing is left) plus ``-`` and the first ``SLUG_HASH_CHARS`` hex chars of the SHA-256 of
    the id (UTF-8, lone surrogates kept): ``a b`` → ``a-b-<hash>``, never ``a-b`` itself, and
    ``../../etc/passwd`` → ``etc-passwd-<hash>``; a Windows device name gets a prefix too (``CON`` →
    ``session-CON-<hash>``: the wiki is a git repository a Windows user may clone). Pure; the
    stem is at most 219 chars.
    """
    slug = _UNSAFE.sub("-", session_id).strip(".-")[:200]
    if slug == session_id and not windows_unsafe(slug):
        return slug
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:SLUG_HASH_CHARS]
    base = slug.rstrip(".-") or "session"
    if windows_unsafe(base):  # CON, con.x: a device name before the first dot stays one with the hash
        base = f"session-{base}"
    return f"{base}-{digest}"


def _substantive(rows) -> list:
    """Observations worth a page: all but start/end, plus a start that carries a prompt
    (Copilot CLI's initial prompt)."""
    return [r for r in rows if r["kind"] not in BOUNDARY_KINDS or _start_with_prompt(r)]


def _start_with_prompt(r) -> bool:
    return r["kind"] == "session-start" and bool((r["body"] or "").strip())


@handler("session.end")
def session_end(tx: Tx, env: Envelope, cmd: SessionEnd) -> dict:
    """End a session. Result ``{ended, changed, observation_count, page_id, path, handoff_id,
    returned_handoffs, reason}``.

    ``cmd.if_last_event_at`` (the idle finaliser's precondition): when the session has seen
    an event since, nothing happens (``{ended: false, skipped: "active"}``). A session with
    no real event (``REAL_KINDS``) opens no handoff and returns the handoffs it claimed to
    ``open`` (with the ones that claim had superseded).
    """
    if refuse(tx, cmd.session_id, occurred(tx, cmd.ended_at)) is not None:  # purged: dropped and counted
        return {"ended": False, "changed": False, "skipped": "purged", "observation_count": 0}
    scope = tx.scope(create=True)
    row = tx.conn.execute(
        "SELECT * FROM sessions WHERE project_id = ? AND session_id = ?", (scope.project_id, cmd.session_id)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {cmd.session_id!r} has no observations in {scope.workspace}/{scope.project}",
                            code="session_not_found", data={"session_id": cmd.session_id})
    count = row["observation_count"]
    if cmd.historical and row["observation_count"] > row["imported_count"]:
        # Live capture wins: an imported transcript's end must not end (or re-end) a session
        # hooks captured; its own end, or the idle finaliser, ends it (docs/lifecycle.md).
        return {"ended": False, "changed": False, "skipped": "captured_live", "observation_count": count}
    if cmd.if_last_event_at is not None and (row["last_event_at"] != cmd.if_last_event_at
                                             or row["ended_at"] is not None):
        return {"ended": False, "changed": False, "skipped": "active" if row["ended_at"] is None else "ended",
                "observation_count": count}
    if row["ended_observation_count"] is not None and count <= row["ended_observation_count"]:
        if row["ended_at"] is None:  # resumed without new events: just close it again
            tx.conn.execute("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
                            (occurred(tx, cmd.ended_at), cmd.reason, row["id"]))
        return {"ended": True, "changed": False, "observation_count": count,
                "page_id": row["summary_page_id"], "path": None, "handoff_id": None}
    # The end's own event time; without one, the session's last event (never arrival time:
    # a late delivery must not make old work look new).
    ended_at = occurred(tx, cmd.ended_at or row["last_event_at"])
    rows = tx.conn.execute(
        "SELECT kind, agent, title, body, tool_name, cwd FROM observations WHERE project_id = ? AND session_id = ?"
        " ORDER BY id", (scope.project_id, cmd.session_id),
    ).fetchall()
    substantive = _substantive(rows)
    tail = next((r["body"] for r in reversed(rows)  # a bare session end's body is its title
                 if r["kind"] == "session-end" and r["body"] and r["body"] != r["title"]), None)
    real = any(r["kind"] in REAL_KINDS or _start_with_prompt(r) for r in rows)
    page_id = handoff_id = path = None
    if substantive or tail:
        roots = session_roots(tx, scope, row)
        d = digest(substantive, roots)
        d.tail = tail
        path = f"sessions/{session_slug(cmd.session_id)}.md"
        # Observations stored before ingress removed NUL (``sanitize.storable``) may still hold
        # one, which the page store refuses: the session would never end. The page drops it.
        title, body = map(storable, render_page(cmd.session_id, row, d, ended_at, count, roots, cmd.reason))
        fm = {"session_id": cmd.session_id, "agent": row["agent"], "cwd": row["cwd"],
              "started_at": row["started_at"], "ended_at": ended_at, "end_reason": cmd.reason or "session-end",
              "observation_count": count, "tags": ["session"]}
        if cmd.historical:
            fm["imported"] = True
        res = tx.pages.write(scope, PageInput(path=path, body=body, title=title, frontmatter=fm),
                             evidence=[{"kind": "session", "id": cmd.session_id}], session_id=cmd.session_id)
        page_id = res["page_id"]
        _retire_old_path(tx, scope, row, cmd.session_id, path)
        # An imported old session is history, and a child session's parent carries the work on:
        # neither is work to continue (docs/lifecycle.md).
        if real and not cmd.historical and not row["parent_session_id"]:
            handoff_id = _automatic_handoff(tx, scope, cmd, row, ended_at,
                                            tuple(map(storable, render_handoff(cmd.session_id, row, d, path,
                                                                               roots, cmd.reason))))
    returned = [] if real or cmd.historical else give_back_handoffs(tx, scope, cmd.session_id)
    dropped = [] if cmd.historical else drop_working_pages(tx, scope, cmd.session_id)
    tx.conn.execute(
        "UPDATE sessions SET ended_at = ?, ended_observation_count = ?, summary_page_id = coalesce(?, summary_page_id),"
        " end_reason = ? WHERE id = ?", (ended_at, count, page_id, cmd.reason, row["id"]),
    )
    if substantive or tail:
        tx.conn.execute(
            "INSERT OR IGNORE INTO session_consolidation_jobs(workspace_id, project_id, session_id, generation,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (scope.workspace_id, scope.project_id, cmd.session_id, count, tx.now, tx.now),
        )
    tx.wiki.append_ledger(scope, ended_at[:7], ledger_entry(
        ended_at, "session-end", cmd.agent, cmd.session_id,
        f"ended after {count} events" + (f"; summary {path}" if path else "")))
    tx.audit("session.end", cmd.session_id, {"observation_count": count, "page_id": page_id,
                                             "handoff_id": handoff_id, "reason": cmd.reason,
                                             "returned_handoffs": returned}, scope=scope)
    tx.emit("session.ended", {"workspace_id": scope.workspace_id, "project_id": scope.project_id,
                              "session_id": cmd.session_id, "generation": count, "page_id": page_id,
                              "path": path, "handoff_id": handoff_id, "reason": cmd.reason})
    return {"ended": True, "changed": True, "observation_count": count, "page_id": page_id, "path": path,
            "handoff_id": handoff_id, "returned_handoffs": returned, "reason": cmd.reason,
            "working_dropped": dropped}


def drop_working_pages(tx: Tx, scope, session_id: str) -> list[str]:
    """Delete the live working-tier pages (frontmatter ``tier: working``) this session end
    drops; return their paths.

    The working tier lives for the current session only: a session's end drops, in the end's
    transaction, its own working pages (the page's ``session_id``, as a column or in its
    frontmatter) and every working page of the project that names no session — such a page
    belongs to whatever session was current when it was written, so it lasts until the
    project's next session end (a page written through MCP without a session id, say). Pages
    of other sessions stay until those end. The observations stay, and git keeps the text.
    """
    rows = tx.conn.execute(
        "SELECT path FROM pages WHERE project_id = ? AND is_latest = 1 AND tier = 'working'"
        " AND (session_id = ? OR json_extract(frontmatter, '$.session_id') = ?"
        "      OR (coalesce(session_id, '') = '' AND coalesce(json_extract(frontmatter, '$.session_id'), '') = ''))"
        " ORDER BY path",
        (scope.project_id, session_id, session_id)).fetchall()
    for r in rows:
        tx.pages.delete(scope, r["path"], reason="deleted")
    return [r["path"] for r in rows]


def _retire_old_path(tx: Tx, scope, row, session_id: str, path: str) -> None:
    """Retire the session's earlier page when it lives at another path (a page written before
    ids that are no safe stem got their hash, ``session_slug``), so one session keeps one live
    page; a page another session has since written over is left to that session."""
    if row["summary_page_id"] is None:
        return
    old = tx.conn.execute("SELECT path FROM pages WHERE id = ?", (row["summary_page_id"],)).fetchone()
    if old is None or old["path"] == path or not old["path"].startswith("sessions/"):
        return
    live = tx.pages.get(scope, old["path"])
    if live is not None and live["session_id"] == session_id:
        tx.pages.delete(scope, old["path"], reason="renamed")


def give_back_handoffs(tx: Tx, scope, session_id: str) -> list[int]:
    """Return to ``open`` the handoffs ``session_id`` claimed (it did nothing with them), and
    the automatic ones each claim had superseded. Returns the reopened claimed ids.

    A claimed automatic handoff whose author has re-ended since (it was resumed, and its new
    end opened a fresher handoff because this one was claimed) is not reopened: it becomes
    superseded by the fresher one, so a session never has two open automatic handoffs (the
    stale one would be delivered later)."""
    rows = tx.conn.execute(
        "SELECT id, automatic, from_session_id FROM handoffs WHERE project_id = ? AND accepted_session_id = ?"
        " AND status = 'accepted'", (scope.project_id, session_id)).fetchall()
    ids = []
    for r in rows:
        hid = r["id"]
        fresher = tx.conn.execute(
            "SELECT id FROM handoffs WHERE project_id = ? AND from_session_id = ? AND automatic = 1"
            " AND status = 'open' AND id != ? ORDER BY id DESC LIMIT 1",
            (scope.project_id, r["from_session_id"], hid)).fetchone() if r["automatic"] and r["from_session_id"] else None
        if fresher is not None:
            tx.conn.execute("UPDATE handoffs SET status = 'superseded', closed_at = ?, superseded_by = ?,"
                            " accepted_by = NULL, accepted_session_id = NULL WHERE id = ?",
                            (tx.now, fresher["id"], hid))
            continue
        ids.append(hid)
        tx.conn.execute("UPDATE handoffs SET status = 'open', closed_at = NULL, accepted_by = NULL,"
                        " accepted_session_id = NULL WHERE id = ?", (hid,))
        tx.conn.execute("UPDATE handoffs SET status = 'open', closed_at = NULL, superseded_by = NULL"
                        " WHERE superseded_by = ? AND status = 'superseded'", (hid,))
        tx.emit("handoff.returned", {"handoff_id": hid, "session_id": session_id})
    return ids


def session_roots(tx: Tx, scope, row) -> list[str]:
    """Directories the session page's paths are relative to, first match wins: the
    repository root (this command's scope, else the one recorded on the session), then the
    session's cwd."""
    root = (tx.env.scope.root if tx.env.scope else None) or row["root"]
    return [p for p in dict.fromkeys((root, row["cwd"])) if p]


def _automatic_handoff(tx: Tx, scope, cmd: SessionEnd, row, ended_at: str, handoff: tuple[str, str]) -> int:
    """Open (or refresh, on a re-end) this session's automatic handoff; returns its id.

    The handoff has no owner (it belongs to its place: root, else cwd), ``event_at`` =
    ``ended_at`` (the end's event time) and ``started_at`` = the session's first event. A
    handoff that a later session of the same place already follows (that session began
    after this one's work ended: a late delivery, e.g. a spool drained after an outage) and
    that was already claimed is born ``superseded`` by it: old work never becomes the one
    delivered. (Under an open follower it stays open: the claim folds it and lists it.)
    """
    from aimem_writer.ops.handoffs import event_time, follows, newest_first, norm_cwd, place_matches

    title, body = handoff
    cwd = norm_cwd(cmd.cwd or row["cwd"])
    root = norm_cwd((tx.env.scope.root if tx.env.scope else None) or row["root"])
    existing = tx.conn.execute(
        "SELECT id FROM handoffs WHERE project_id = ? AND from_session_id = ? AND automatic = 1 AND status = 'open'",
        (scope.project_id, cmd.session_id),
    ).fetchone()
    if existing:
        hid = existing["id"]
        tx.conn.execute("UPDATE handoffs SET title = ?, body = ?, cwd = ?, root = coalesce(?, root), created_at = ?,"
                        " event_at = ?, started_at = ?, owner = NULL WHERE id = ?",
                        (title, body, cwd, root, tx.now, ended_at, row["started_at"], hid))
    else:
        hid = tx.conn.execute(
            "INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent, from_session_id,"
            " cwd, root, title, body, status, created_at, event_at, started_at)"
            " VALUES (?, ?, 1, 0, NULL, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?)",
            (scope.workspace_id, scope.project_id, cmd.agent or row["agent"], cmd.session_id, cwd, root,
             title, body, tx.now, ended_at, row["started_at"]),
        ).lastrowid
        tx.emit("handoff.opened", {"handoff_id": hid, "automatic": True, "cwd": cwd, "root": root})
    mine = tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (hid,)).fetchone()
    # Seconds precision in SQL (stored times vary in width), exact in ``follows``.
    later = newest_first(tx.conn.execute(
        "SELECT * FROM handoffs WHERE project_id = ? AND automatic = 1 AND id != ?"
        " AND status IN ('accepted', 'superseded')"
        " AND substr(coalesce(started_at, event_at, created_at), 1, 19) >= substr(?, 1, 19)",
        (scope.project_id, hid, event_time(mine)),
    ).fetchall())
    by = next((g for g in later if follows(g, mine) and place_matches(g["root"], g["cwd"], root, cwd)), None)
    if by is not None:
        tx.conn.execute("UPDATE handoffs SET status = 'superseded', closed_at = ?, superseded_by = ? WHERE id = ?",
                        (tx.now, by["id"], hid))
    return hid
