"""Handoff ops: ``handoff.begin``, ``handoff.accept`` (claim exactly once), ``handoff.cancel``.

Eligibility for an accept: the handoff is open, in the envelope's project, not the
accepting session's own, addressed to nobody or to the accepting agent, visible to the
actor (``shared``, no owner, or owned by the actor), and in the same place
(``place_matches``): when both sides know the project root (the hook client sends it) the
roots must be equal — or both be roots of the project (its first root and its aliases: a
moved, renamed or second checkout of one repository) —, so a session anywhere in a
repository — a subdirectory, a linked worktree, the checkout after a move — gets the
handoff left anywhere else in it; otherwise the cwd rule: empty, equal, or a parent on a
path boundary (``/repo`` matches ``/repo/sub``, never ``/repo-old``), or inside the other
side's root. Every location is compared in its normalised form (``aimem_common.locations``:
``C:\\Repo\\`` and ``c:/repo`` are one place).

Visibility: an automatic handoff belongs to its place, never to the actor that wrote it
(a hook's session end and the maintainer's idle finaliser alike), so every caller that
matches the place sees it; a manual one is the opener's unless ``shared``.

Which one, and what happens to the rest (docs/lifecycle.md): manual handoffs beat
automatic ones; among automatic ones the newest by event time (``event_at``: when its
session's work ended; arrival only breaks ties) wins. Automatic handoffs of one place form
chains: ``g`` follows ``h`` when ``g``'s session began at or after ``h``'s ended (so ``g``
could have continued ``h``). A claim takes the heads (handoffs no other eligible one
follows): the newest is the handoff, up to ``MAX_PARALLEL`` others are sessions that ran
beside it (``parallel``: delivered with it, claimed by the same session); every
eligible automatic one a head follows is an earlier link of a chain and is superseded
(``status = 'superseded'``, ``superseded_by`` = the head that follows it), listed in
``folded`` so the next agent sees what was folded in; its session page stays searchable.
Manual handoffs are never touched by a claim: they stay open until claimed or cancelled.
A claim with ``only_new_session`` (a session start through ``/hook``) takes nothing for a
session already known with real events (resumed, already open) or a child session. A
session that ends without doing anything gives its claim back (``ops/sessions.py``),
which reopens the parallel and superseded ones too.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from datetime import UTC, datetime

from aimem_common import locations
from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.handoffs import HandoffAccept, HandoffBegin, HandoffCancel
from aimem_common.read import scopes

from aimem_writer.ops import workstreams
from aimem_writer.registry import handler
from aimem_writer.tx import Tx
from aimem_writer.tombstones import refuse

FIELDS = ("id", "automatic", "shared", "owner", "from_agent", "to_agent", "from_session_id", "cwd", "root",
          "title", "body", "status", "created_at", "closed_at", "accepted_by", "accepted_session_id",
          "superseded_by", "event_at", "started_at")
MAX_FOLDED = 10
_NEVER = datetime.min.replace(tzinfo=UTC)
MAX_PARALLEL = 3  # sessions delivered beside the newest one; more stay open for the next start


def norm_cwd(cwd: str | None) -> str | None:
    """Normalise a working directory or root for storage and boundary matching
    (``aimem_common.locations.normalize``: one separator, no trailing one, ``..`` folded,
    Windows locations lower-cased)."""
    return locations.normalize(cwd)


def cwd_matches(handoff_cwd: str | None, cwd: str | None) -> bool:
    """True when ``handoff_cwd`` is empty, equals ``cwd`` or is its parent on a path boundary."""
    if handoff_cwd is None or cwd is None:
        return True
    if handoff_cwd == cwd or handoff_cwd == "/":
        return True
    return cwd.startswith(handoff_cwd.rstrip("/") + "/")


def _inside(path: str | None, root: str | None) -> bool:
    return bool(path and root) and (path == root or path.startswith(root.rstrip("/") + "/"))


def place_matches(h_root: str | None, h_cwd: str | None, root: str | None, cwd: str | None,
                  project_roots: Collection[str] = ()) -> bool:
    """True when a handoff left at ``h_root``/``h_cwd`` belongs to a session at ``root``/``cwd``.

    Both roots known: they must be equal, or both among ``project_roots`` (the project's
    first root and its aliases, normalised). One root known: the other side's cwd inside
    it, or the cwd rule. No root: the cwd rule (``cwd_matches``). Every location is
    normalised first (``norm_cwd``).
    """
    h_root, h_cwd, root, cwd = norm_cwd(h_root), norm_cwd(h_cwd), norm_cwd(root), norm_cwd(cwd)
    if h_root and root:
        return h_root == root or (h_root in project_roots and root in project_roots)
    if h_root:
        return cwd is None or _inside(cwd, h_root) or cwd_matches(h_cwd, cwd)
    if root:
        return h_cwd is None or _inside(h_cwd, root) or cwd_matches(h_cwd, cwd)
    return cwd_matches(h_cwd, cwd)


def public(row) -> dict:
    d = {k: row[k] for k in FIELDS}
    d["automatic"], d["shared"] = bool(d["automatic"]), bool(d["shared"])
    return d


@handler("handoff.begin")
def handoff_begin(tx: Tx, env: Envelope, cmd: HandoffBegin) -> dict:
    """Open a manual handoff. Result ``{handoff: {...}}``.

    A handoff that names a purged session (``session_id`` with a live purge tombstone) is
    not stored: like every other late op of that session it is dropped and counted on the
    tombstone (``refused``), and the result is ``{handoff: null, skipped: "purged",
    session_id}`` — nothing is created, not even its project.
    """
    if cmd.session_id and refuse(tx, cmd.session_id, tx.now) is not None:
        return {"handoff": None, "skipped": "purged", "session_id": cmd.session_id}
    scope = tx.scope(create=True)
    title = (cmd.title or " ".join(cmd.body.split())[:80]).strip() or "Handoff"
    hid = tx.conn.execute(
        "INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent, to_agent,"
        " from_session_id, cwd, title, body, status, created_at, event_at)"
        " VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)",
        (scope.workspace_id, scope.project_id, int(cmd.shared), tx.actor, cmd.from_agent, cmd.to_agent,
         cmd.session_id, norm_cwd(cmd.cwd), title, cmd.body, tx.now, tx.now),
    ).lastrowid
    row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (hid,)).fetchone()
    tx.audit("handoff.begin", str(hid), {"cwd": row["cwd"]}, scope=scope)
    tx.emit("handoff.opened", {"handoff_id": hid, "automatic": False, "cwd": row["cwd"]})
    return {"handoff": public(row)}


def _visible(tx: Tx, row, any_owner: bool = False) -> bool:
    """An automatic handoff is its place's (any actor); a manual one its opener's unless shared
    (``any_owner``: every one, root recovering another operator's)."""
    return (any_owner or bool(row["automatic"]) or bool(row["shared"]) or row["owner"] is None
            or row["owner"] == tx.actor)


def instant(value: str | None) -> datetime:
    """An ISO-8601 UTC text as an aware datetime (``datetime.min`` UTC when unusable).

    Stored times have a variable width (``…:00Z`` / ``…:00.5Z``): compared as text they
    misorder within one second, so ordering is done on these values.
    """
    try:
        dt = datetime.fromisoformat((value or "").replace("Z", "+00:00"))
    except ValueError:
        return _NEVER
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def event_time(row) -> str:
    """When a handoff's work ended (``event_at``; ``created_at`` for rows without one)."""
    return row["event_at"] or row["created_at"]


def newest_first(rows: list) -> list:
    """``rows`` (handoffs) manual first, then by event time, arrival, id, newest first."""
    out = sorted(rows, key=lambda r: (instant(event_time(r)), instant(r["created_at"]), r["id"]), reverse=True)
    return sorted(out, key=lambda r: r["automatic"])


def follows(later, earlier) -> bool:
    """True when ``later``'s session began at or after ``earlier``'s work ended: ``later``
    could have continued ``earlier`` (one chain). Overlapping sessions ran in parallel. Two
    handoffs of one session are always one chain, the newer (by event time, then id) last: a
    session is never delivered beside itself."""
    if later["id"] == earlier["id"]:
        return False
    if later["from_session_id"] and later["from_session_id"] == earlier["from_session_id"]:
        return (instant(event_time(later)), later["id"]) > (instant(event_time(earlier)), earlier["id"])
    began = instant(later["started_at"] or event_time(later))
    return began >= instant(event_time(earlier))


def _refusal(tx: Tx, project_id: str, session_id: str | None) -> str | None:
    """Why a session start must claim nothing (``only_new_session``), else None: a child
    session, or one already known with any event but its starts (resumed, already open)."""
    if not session_id:
        return None
    row = tx.conn.execute("SELECT parent_session_id FROM sessions WHERE project_id = ? AND session_id = ?",
                          (project_id, session_id)).fetchone()
    if row is None:
        return None
    if row["parent_session_id"]:
        return "child_session"
    known = tx.conn.execute(
        "SELECT 1 FROM observations WHERE project_id = ? AND session_id = ? AND kind != 'session-start' LIMIT 1",
        (project_id, session_id)).fetchone()
    return "session_known" if known else None


@handler("handoff.accept")
def handoff_accept(tx: Tx, env: Envelope, cmd: HandoffAccept) -> dict:
    """Claim one open handoff (by id, or the best eligible one; see the module docstring).

    With ``run_id``/``through_seq`` (a managed start) the run's workstream packet is claimed
    in the same command (``workstreams.deliver``), after the handoff: both or neither; the
    result adds ``delivered`` ``{delivered_seq, advanced}``. A delivery that fails
    (``run_not_found``, ``beyond_ledger``) fails the whole command, so the handoff stays open.

    Result ``{handoff: {...}|null, superseded: [ids], workspace, project}``; the handoff
    carries ``folded`` (superseded earlier links: ``{id, title, from_session_id, created_at,
    event_at}``, ≤ ``MAX_FOLDED``) and ``parallel`` (full records of the parallel sessions'
    handoffs claimed with it, ≤ ``MAX_PARALLEL``). ``skipped`` says why an
    ``only_new_session`` claim took nothing.

    Raises:
        NotFoundError: ``handoff_id`` is not a handoff of this project visible to the actor;
            ``run_not_found``.
        ConflictError: ``handoff_not_open`` — that handoff was already accepted, expired or
            superseded.
        BadRequestError: ``beyond_ledger``.
    """
    out = _accept(tx, env, cmd)
    if cmd.run_id is not None and cmd.through_seq is not None:
        out["delivered"] = workstreams.deliver(tx, cmd.run_id, cmd.through_seq)
    return out


def _accept(tx: Tx, env: Envelope, cmd: HandoffAccept) -> dict:
    scope = tx.scope(create=False)
    cwd = norm_cwd(cmd.cwd)
    root = norm_cwd(env.scope.root if env.scope else None)
    roots = {norm_cwd(r) for r in scopes.project_roots(tx.conn, scope.project_id)}
    parallel: list = []
    folded: list = []
    if cmd.handoff_id is not None:
        row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ? AND project_id = ?",
                              (cmd.handoff_id, scope.project_id)).fetchone()
        if row is None or not _visible(tx, row, cmd.any_owner):
            raise NotFoundError(f"handoff {cmd.handoff_id} not found", data={"handoff_id": cmd.handoff_id})
        if row["status"] != "open":
            raise ConflictError(f"handoff {cmd.handoff_id} is {row['status']}", code="handoff_not_open",
                                data={"handoff_id": cmd.handoff_id, "status": row["status"]})
        picked = row
    else:
        refusal = _refusal(tx, scope.project_id, cmd.session_id) if cmd.only_new_session else None
        if refusal:
            return {"handoff": None, "superseded": [], "skipped": refusal,
                    "workspace": scope.workspace, "project": scope.project}
        rows = newest_first(tx.conn.execute(
            "SELECT * FROM handoffs WHERE project_id = ? AND status = 'open'", (scope.project_id,)).fetchall())
        eligible = [
            r for r in rows
            if _visible(tx, r, cmd.any_owner) and place_matches(r["root"], r["cwd"], root, cwd, roots)
            and (r["to_agent"] is None or (cmd.agent is not None and r["to_agent"] == cmd.agent))
            and not (cmd.session_id and r["from_session_id"] == cmd.session_id)
        ]
        if not eligible:
            return {"handoff": None}
        picked = eligible[0]
        if picked["automatic"]:
            autos = [r for r in eligible if r["automatic"]]
            heads = [h for h in autos if not any(follows(g, h) for g in autos)]
            head_ids = {h["id"] for h in heads}
            picked, parallel = heads[0], heads[1:1 + MAX_PARALLEL]
            delivered = [picked, *parallel]
            for r in autos:
                if r["id"] in head_ids:
                    continue
                by = next((h for h in delivered if follows(h, r)), picked)
                folded.append((r, by))
    claimed = [picked, *parallel]
    for r in claimed:
        tx.conn.execute(
            "UPDATE handoffs SET status = 'accepted', closed_at = ?, accepted_by = ?, accepted_session_id = ?"
            " WHERE id = ? AND status = 'open'",
            (tx.now, cmd.agent or tx.actor, cmd.session_id, r["id"]),
        )
    for r, by in folded:
        tx.conn.execute("UPDATE handoffs SET status = 'superseded', closed_at = ?, superseded_by = ?"
                        " WHERE id = ? AND status = 'open'", (tx.now, by["id"], r["id"]))
    ids = [r["id"] for r, _ in folded]
    tx.audit("handoff.accept", str(picked["id"]), {"superseded": ids, "parallel": [r["id"] for r in parallel]},
             scope=scope)
    tx.emit("handoff.accepted", {"handoff_id": picked["id"], "superseded": ids,
                                 "parallel": [r["id"] for r in parallel]})
    out = public(tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (picked["id"],)).fetchone())
    out["folded"] = [{"id": r["id"], "title": r["title"], "from_session_id": r["from_session_id"],
                      "created_at": r["created_at"], "event_at": event_time(r)} for r, _ in folded[:MAX_FOLDED]]
    out["parallel"] = [public(tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (r["id"],)).fetchone())
                       for r in parallel]
    return {"handoff": out, "superseded": ids, "workspace": scope.workspace, "project": scope.project}


@handler("handoff.cancel")
def handoff_cancel(tx: Tx, env: Envelope, cmd: HandoffCancel) -> dict:
    """Expire an open handoff. Result ``{cancelled: bool, handoff_id}`` (false when already closed)."""
    scope = tx.scope(create=False)
    row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ? AND project_id = ?",
                          (cmd.handoff_id, scope.project_id)).fetchone()
    if row is None or not _visible(tx, row, cmd.any_owner):
        raise NotFoundError(f"handoff {cmd.handoff_id} not found", data={"handoff_id": cmd.handoff_id})
    if row["status"] != "open":
        return {"cancelled": False, "handoff_id": cmd.handoff_id, "status": row["status"]}
    tx.conn.execute("UPDATE handoffs SET status = 'expired', closed_at = ? WHERE id = ?", (tx.now, cmd.handoff_id))
    tx.audit("handoff.cancel", str(cmd.handoff_id), None, scope=scope)
    tx.emit("handoff.cancelled", {"handoff_id": cmd.handoff_id})
    return {"cancelled": True, "handoff_id": cmd.handoff_id, "status": "expired"}
