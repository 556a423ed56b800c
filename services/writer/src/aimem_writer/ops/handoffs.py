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

Which one, and what happens to the rest: manual handoffs beat automatic ones; among
automatic ones the newest wins. Claiming an automatic handoff supersedes the older
eligible automatic ones of the same place (``status = 'superseded'``, ``superseded_by`` =
the claimed id): they are earlier links of one chain, each session page stays searchable,
and the claim lists them (``folded``) so the next agent sees what was folded in. Manual
handoffs are never touched by a claim: they stay open until claimed or cancelled. A
session that ends without doing anything gives its claim back (``ops/sessions.py``),
which reopens the superseded ones too.
"""

from __future__ import annotations

from collections.abc import Collection

from aimem_common import locations
from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.handoffs import HandoffAccept, HandoffBegin, HandoffCancel
from aimem_common.read import scopes

from aimem_writer.registry import handler
from aimem_writer.tx import Tx

FIELDS = ("id", "automatic", "shared", "owner", "from_agent", "to_agent", "from_session_id", "cwd", "root",
          "title", "body", "status", "created_at", "closed_at", "accepted_by", "accepted_session_id",
          "superseded_by")
MAX_FOLDED = 10


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
    """Open a manual handoff. Result ``{handoff: {...}}``."""
    scope = tx.scope(create=True)
    title = (cmd.title or " ".join(cmd.body.split())[:80]).strip() or "Handoff"
    hid = tx.conn.execute(
        "INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent, to_agent,"
        " from_session_id, cwd, title, body, status, created_at) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)",
        (scope.workspace_id, scope.project_id, int(cmd.shared), tx.actor, cmd.from_agent, cmd.to_agent,
         cmd.session_id, norm_cwd(cmd.cwd), title, cmd.body, tx.now),
    ).lastrowid
    row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (hid,)).fetchone()
    tx.audit("handoff.begin", str(hid), {"cwd": row["cwd"]}, scope=scope)
    tx.emit("handoff.opened", {"handoff_id": hid, "automatic": False, "cwd": row["cwd"]})
    return {"handoff": public(row)}


def _visible(tx: Tx, row) -> bool:
    return bool(row["shared"]) or row["owner"] is None or row["owner"] == tx.actor


@handler("handoff.accept")
def handoff_accept(tx: Tx, env: Envelope, cmd: HandoffAccept) -> dict:
    """Claim one open handoff (by id, or the best eligible one). Result ``{handoff: {...}|null}``.

    Raises:
        NotFoundError: ``handoff_id`` is not a handoff of this project visible to the actor.
        ConflictError: ``handoff_not_open`` — that handoff was already accepted, expired or
            superseded.
    """
    scope = tx.scope(create=False)
    cwd = norm_cwd(cmd.cwd)
    root = norm_cwd(env.scope.root if env.scope else None)
    roots = {norm_cwd(r) for r in scopes.project_roots(tx.conn, scope.project_id)}
    if cmd.handoff_id is not None:
        row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ? AND project_id = ?",
                              (cmd.handoff_id, scope.project_id)).fetchone()
        if row is None or not _visible(tx, row):
            raise NotFoundError(f"handoff {cmd.handoff_id} not found", data={"handoff_id": cmd.handoff_id})
        if row["status"] != "open":
            raise ConflictError(f"handoff {cmd.handoff_id} is {row['status']}", code="handoff_not_open",
                                data={"handoff_id": cmd.handoff_id, "status": row["status"]})
        picked, eligible_auto = row, []
    else:
        rows = tx.conn.execute(
            "SELECT * FROM handoffs WHERE project_id = ? AND status = 'open'"
            " ORDER BY automatic ASC, created_at DESC, id DESC", (scope.project_id,),
        ).fetchall()
        eligible = [
            r for r in rows
            if _visible(tx, r) and place_matches(r["root"], r["cwd"], root, cwd, roots)
            and (r["to_agent"] is None or (cmd.agent is not None and r["to_agent"] == cmd.agent))
            and not (cmd.session_id and r["from_session_id"] == cmd.session_id)
        ]
        if not eligible:
            return {"handoff": None}
        picked = eligible[0]
        eligible_auto = [r for r in eligible if r["automatic"] and r["id"] != picked["id"]]
    tx.conn.execute(
        "UPDATE handoffs SET status = 'accepted', closed_at = ?, accepted_by = ?, accepted_session_id = ?"
        " WHERE id = ? AND status = 'open'",
        (tx.now, cmd.agent or tx.actor, cmd.session_id, picked["id"]),
    )
    folded = []
    if picked["automatic"]:
        for r in eligible_auto:
            if (r["created_at"], r["id"]) <= (picked["created_at"], picked["id"]):
                tx.conn.execute("UPDATE handoffs SET status = 'superseded', closed_at = ?, superseded_by = ?"
                                " WHERE id = ? AND status = 'open'", (tx.now, picked["id"], r["id"]))
                folded.append(r)
    row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ?", (picked["id"],)).fetchone()
    ids = [r["id"] for r in folded]
    tx.audit("handoff.accept", str(picked["id"]), {"superseded": ids}, scope=scope)
    tx.emit("handoff.accepted", {"handoff_id": picked["id"], "superseded": ids})
    out = public(row)
    out["folded"] = [{"id": r["id"], "title": r["title"], "from_session_id": r["from_session_id"],
                      "created_at": r["created_at"]} for r in folded[:MAX_FOLDED]]
    return {"handoff": out, "superseded": ids, "workspace": scope.workspace, "project": scope.project}


@handler("handoff.cancel")
def handoff_cancel(tx: Tx, env: Envelope, cmd: HandoffCancel) -> dict:
    """Expire an open handoff. Result ``{cancelled: bool, handoff_id}`` (false when already closed)."""
    scope = tx.scope(create=False)
    row = tx.conn.execute("SELECT * FROM handoffs WHERE id = ? AND project_id = ?",
                          (cmd.handoff_id, scope.project_id)).fetchone()
    if row is None or not _visible(tx, row):
        raise NotFoundError(f"handoff {cmd.handoff_id} not found", data={"handoff_id": cmd.handoff_id})
    if row["status"] != "open":
        return {"cancelled": False, "handoff_id": cmd.handoff_id, "status": row["status"]}
    tx.conn.execute("UPDATE handoffs SET status = 'expired', closed_at = ? WHERE id = ?", (tx.now, cmd.handoff_id))
    tx.audit("handoff.cancel", str(cmd.handoff_id), None, scope=scope)
    tx.emit("handoff.cancelled", {"handoff_id": cmd.handoff_id})
    return {"cancelled": True, "handoff_id": cmd.handoff_id, "status": "expired"}
