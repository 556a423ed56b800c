"""Managed-workstream ops.

``workstream.lease``, ``workstream.append``, ``workstream.deliver``, ``workstream.rename``,
``workstream.delete``.

The ledger of a workstream is append-only. Each ``workstream.append`` that stores events
writes one immutable JSONL segment, ``<data_dir>/raw/workstreams/<id>/<first>-<last>.jsonl``
(zero-padded sequence numbers; tmp + fsync + rename), inside the command, before the
batch commits: the segments are the source of truth, the rows index them (``segment``
names the file). A command rolled back after writing its segment leaves a file for
sequence numbers the database does not hold; the next append that takes those numbers
writes that name again (same name, its own content), so a segment whose range is within
``workstreams.last_seq`` always matches the rows.

Leases: ``open`` creates the workstream (project + checkout root) when missing, marks
lapsed leases ``expired`` and refuses while another run holds a live one; ``renew`` moves
``lease_expires_at`` ``lease_s`` on (``LEASE_SECONDS`` by default); ``release`` (a clean exit) and ``cancel`` (a
handled launcher failure) end it. An unclean death is bounded by the expiry.

Cursors: ``workstream_harnesses.delivered_seq`` is how far a harness has seen the ledger.
``workstream.deliver`` moves it forward after a session start handed the harness a packet;
an append by a harness that had seen everything before it moves its cursor past its own
events (a harness is never handed back what it said).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from aimem_common import locations
from aimem_common.commands import Envelope
from aimem_common.commands.workstreams import (WorkstreamAppend, WorkstreamDelete, WorkstreamDeliver, WorkstreamLease,
                                               WorkstreamRename)
from aimem_common.errors import BadRequestError, ConflictError, NotFoundError
from aimem_common.sanitize import storable
from aimem_common.workstreams import SEGMENTS_DIR, contains_marker, segment_name, segment_text

from aimem_writer.registry import handler
from aimem_writer.tx import Tx
from aimem_writer.wiki import atomic_write, fsync_dir


def _later(now: str, seconds: int) -> str:
    at = datetime.fromisoformat(now.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _workstream(tx: Tx, cmd: WorkstreamLease) -> dict:
    scope = tx.scope(create=True)
    root = locations.normalize(cmd.checkout_root or (tx.env.scope.root if tx.env.scope else None) or cmd.cwd)
    if not root:
        raise BadRequestError("a workstream needs a checkout root (or a cwd)", code="missing_root")
    row = tx.conn.execute("SELECT * FROM workstreams WHERE project_id = ? AND checkout_root = ?",
                          (scope.project_id, root)).fetchone()
    if row is None:
        wid = uuid.uuid4().hex
        name = locations.name(root) or scope.project
        tx.conn.execute(
            "INSERT INTO workstreams(id, workspace_id, project_id, checkout_root, name, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", (wid, scope.workspace_id, scope.project_id, root, name, tx.now, tx.now))
        tx.audit("workstream.create", wid, {"checkout_root": root}, scope=scope)
        row = tx.conn.execute("SELECT * FROM workstreams WHERE id = ?", (wid,)).fetchone()
    return dict(row)


def _run(tx: Tx, run_id: str):
    row = tx.conn.execute("SELECT * FROM managed_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"managed run {run_id} not found", code="run_not_found", data={"run_id": run_id})
    return row


def _public_run(row, ws: dict | None = None) -> dict:
    out = {k: row[k] for k in ("id", "workstream_id", "harness", "cwd", "state", "started_at", "renewed_at",
                               "lease_expires_at", "ended_at", "exit_code")}
    if ws is not None:
        out["workstream"] = {"id": ws["id"], "name": ws["name"], "checkout_root": ws["checkout_root"],
                             "last_seq": ws["last_seq"]}
    return out


@handler("workstream.lease")
def workstream_lease(tx: Tx, env: Envelope, cmd: WorkstreamLease) -> dict:
    """Open / renew / release / cancel a run lease. Result ``{run: {..., workstream: {...}}}``.

    ``open`` adds ``run.resume_session_id``: the native session id the harness's last run in
    this workstream appended under (null for a harness new to it).

    Raises:
        ConflictError: ``workstream_leased`` (open: another run holds a live lease; data names
            it), ``lease_not_active`` (renew/release of a run that was released, cancelled,
            or lost its lapsed lease to another run), ``run_exists`` (open with a used id).
        BadRequestError: ``no_harness`` (open without a harness on a workstream that has none).
        NotFoundError: ``run_not_found`` (renew/release/cancel of an unknown run).
    """
    if cmd.action == "open":
        return _open(tx, cmd)
    row = _run(tx, cmd.run_id)
    ws = dict(tx.conn.execute("SELECT * FROM workstreams WHERE id = ?", (row["workstream_id"],)).fetchone())
    if cmd.action == "cancel" and row["state"] in ("released", "cancelled"):
        return {"run": _public_run(row, ws)}
    if row["state"] not in ("active", "expired"):
        raise ConflictError(f"managed run {cmd.run_id} is {row['state']}", code="lease_not_active",
                            data={"run_id": cmd.run_id, "state": row["state"]})
    if row["state"] == "expired" or row["lease_expires_at"] < tx.now:
        other = _live_holder(tx, ws["id"], exclude=cmd.run_id)
        if other is not None and cmd.action == "renew":
            raise ConflictError(f"the lease of run {cmd.run_id} lapsed and run {other['id']} holds the workstream",
                                code="lease_not_active", data={"run_id": cmd.run_id, "holder": other["id"]})
    if cmd.action == "renew":
        tx.conn.execute("UPDATE managed_runs SET state = 'active', renewed_at = ?, lease_expires_at = ? WHERE id = ?",
                        (tx.now, _later(tx.now, cmd.lease_s), cmd.run_id))
    else:
        state = "released" if cmd.action == "release" else "cancelled"
        tx.conn.execute("UPDATE managed_runs SET state = ?, ended_at = ?, lease_expires_at = ?, exit_code = ?"
                        " WHERE id = ?", (state, tx.now, tx.now, cmd.exit_code, cmd.run_id))
        tx.audit(f"workstream.{cmd.action}", cmd.run_id, {"workstream_id": ws["id"], "exit_code": cmd.exit_code},
                 scope=tx.scope_by_ids(ws["workspace_id"], ws["project_id"]))
    return {"run": _public_run(_run(tx, cmd.run_id), ws)}


def _live_holder(tx: Tx, workstream_id: str, exclude: str | None = None):
    return tx.conn.execute(
        "SELECT * FROM managed_runs WHERE workstream_id = ? AND state = 'active' AND lease_expires_at > ?"
        " AND id != ? ORDER BY started_at DESC LIMIT 1", (workstream_id, tx.now, exclude or "")).fetchone()


def _open(tx: Tx, cmd: WorkstreamLease) -> dict:
    if tx.conn.execute("SELECT 1 FROM managed_runs WHERE id = ?", (cmd.run_id,)).fetchone():
        raise ConflictError(f"managed run {cmd.run_id} exists", code="run_exists", data={"run_id": cmd.run_id})
    ws = _workstream(tx, cmd)
    tx.conn.execute("UPDATE managed_runs SET state = 'expired', ended_at = lease_expires_at"
                    " WHERE workstream_id = ? AND state = 'active' AND lease_expires_at <= ?", (ws["id"], tx.now))
    holder = _live_holder(tx, ws["id"])
    if holder is not None:
        raise ConflictError(f"workstream {ws['name']} is held by run {holder['id']} ({holder['harness']}) until "
                            f"{holder['lease_expires_at']}", code="workstream_leased",
                            data={"workstream_id": ws["id"], "run_id": holder["id"], "harness": holder["harness"],
                                  "lease_expires_at": holder["lease_expires_at"]})
    harness = cmd.harness
    if harness is None:
        known = [r["harness"] for r in tx.conn.execute("SELECT harness FROM workstream_harnesses WHERE workstream_id = ?"
                                                        " ORDER BY last_run_at DESC, harness", (ws["id"],))]
        if not known:
            raise BadRequestError("this workstream has no harness yet: name one (aimem run claude-code)",
                                  code="no_harness", data={"workstream_id": ws["id"]})
        usable = [h for h in known if cmd.usable is None or h in cmd.usable]
        if not usable:
            raise BadRequestError(f"none of this workstream's harnesses ({', '.join(known)}) can be started here:"
                                  " name one that is installed", code="no_harness",
                                  data={"workstream_id": ws["id"], "harnesses": known})
        harness = usable[0]
    tx.conn.execute(
        "INSERT INTO managed_runs(id, workstream_id, workspace_id, project_id, harness, cwd, state, started_at,"
        " renewed_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?)",
        (cmd.run_id, ws["id"], ws["workspace_id"], ws["project_id"], harness, locations.normalize(cmd.cwd),
         tx.now, tx.now, _later(tx.now, cmd.lease_s)))
    tx.conn.execute(
        "INSERT INTO workstream_harnesses(workstream_id, harness, last_run_at) VALUES (?, ?, ?)"
        " ON CONFLICT(workstream_id, harness) DO UPDATE SET last_run_at = excluded.last_run_at",
        (ws["id"], harness, tx.now))
    tx.audit("workstream.open", cmd.run_id, {"workstream_id": ws["id"], "harness": harness},
             scope=tx.scope_by_ids(ws["workspace_id"], ws["project_id"]))
    out = _public_run(_run(tx, cmd.run_id), ws)
    # The harness's native session of its last run here: the launcher resumes it (None: a new one).
    out["resume_session_id"] = tx.conn.execute(
        "SELECT native_session_id FROM workstream_harnesses WHERE workstream_id = ? AND harness = ?",
        (ws["id"], harness)).fetchone()[0]
    return {"run": out}


@handler("workstream.append")
def workstream_append(tx: Tx, env: Envelope, cmd: WorkstreamAppend) -> dict:
    """Append a run's events. Result ``{appended, first_seq, last_seq, skipped, rejected, segment}``.

    Raises:
        NotFoundError: ``run_not_found``.
        ConflictError: ``lease_not_active`` (the run was released or cancelled).
    """
    run = _run(tx, cmd.run_id)
    if run["state"] not in ("active", "expired"):
        raise ConflictError(f"managed run {cmd.run_id} is {run['state']}", code="lease_not_active",
                            data={"run_id": cmd.run_id, "state": run["state"]})
    ws = tx.conn.execute("SELECT * FROM workstreams WHERE id = ?", (run["workstream_id"],)).fetchone()
    before = ws["last_seq"]
    seq, skipped, rejected, rows = before, 0, [], []
    seen_keys: set[str] = set()
    for i, ev in enumerate(cmd.events):
        text = storable(ev.text).strip()
        if contains_marker(text):
            rejected.append(i)  # aimem's own packet read back: never re-imported
            continue
        if not text:
            skipped += 1
            continue
        if ev.source_key and (ev.source_key in seen_keys or tx.conn.execute(
                "SELECT 1 FROM workstream_events WHERE workstream_id = ? AND source_key = ?",
                (ws["id"], ev.source_key)).fetchone()):
            skipped += 1
            continue
        if ev.source_key:
            seen_keys.add(ev.source_key)
        seq += 1
        rows.append({"seq": seq, "harness": run["harness"], "run_id": run["id"], "role": ev.role, "text": text,
                     "ts": ev.ts or tx.now, "source_key": ev.source_key})
    if cmd.native_session_id:  # a session purge finds the run's events by it
        tx.conn.execute("UPDATE managed_runs SET native_session_id = ? WHERE id = ?", (cmd.native_session_id, run["id"]))
    if not rows:
        return {"appended": 0, "first_seq": None, "last_seq": before, "skipped": skipped, "rejected": rejected,
                "segment": None}
    segment = segment_name(rows[0]["seq"], seq)
    folder = tx.settings.data_dir / SEGMENTS_DIR / ws["id"]
    atomic_write(folder / segment, segment_text(ws["id"], rows))
    fsync_dir(folder)
    tx.conn.executemany(
        "INSERT INTO workstream_events(workstream_id, workspace_id, project_id, seq, harness, run_id, role, text, ts,"
        " source_key, segment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(ws["id"], ws["workspace_id"], ws["project_id"], r["seq"], r["harness"], r["run_id"], r["role"], r["text"],
          r["ts"], r["source_key"], segment) for r in rows])
    tx.conn.execute("UPDATE workstreams SET last_seq = ?, updated_at = ? WHERE id = ?", (seq, tx.now, ws["id"]))
    # The harness saw everything up to `before` and said these itself: its cursor passes them.
    tx.conn.execute("UPDATE workstream_harnesses SET delivered_seq = ?, native_session_id = coalesce(?, native_session_id)"
                    " WHERE workstream_id = ? AND harness = ? AND delivered_seq >= ?",
                    (seq, cmd.native_session_id, ws["id"], run["harness"], before))
    tx.emit("workstream.appended", {"workstream_id": ws["id"], "first_seq": rows[0]["seq"], "last_seq": seq})
    return {"appended": len(rows), "first_seq": rows[0]["seq"], "last_seq": seq, "skipped": skipped,
            "rejected": rejected, "segment": f"{SEGMENTS_DIR}/{ws['id']}/{segment}"}


@handler("workstream.deliver")
def workstream_deliver(tx: Tx, env: Envelope, cmd: WorkstreamDeliver) -> dict:
    """Move the run's harness cursor to ``through_seq``. Result ``{delivered_seq, advanced}``.

    Raises:
        NotFoundError: ``run_not_found``.
        BadRequestError: ``beyond_ledger`` (``through_seq`` past the workstream's last event).
    """
    return deliver(tx, cmd.run_id, cmd.through_seq)


def deliver(tx: Tx, run_id: str, through_seq: int) -> dict:
    """Move ``run_id``'s harness cursor forward to ``through_seq`` inside the caller's command
    (``workstream.deliver``, and ``handoff.accept`` of a managed start: one transaction for
    the handoff and the packet). Result ``{delivered_seq, advanced}``.

    Raises:
        NotFoundError: ``run_not_found``.
        BadRequestError: ``beyond_ledger``.
    """
    run = _run(tx, run_id)
    last = tx.conn.execute("SELECT last_seq FROM workstreams WHERE id = ?", (run["workstream_id"],)).fetchone()[0]
    if through_seq > last:
        raise BadRequestError(f"seq {through_seq} is past the ledger's end ({last})", code="beyond_ledger")
    cur = tx.conn.execute("UPDATE workstream_harnesses SET delivered_seq = ? WHERE workstream_id = ? AND harness = ?"
                          " AND delivered_seq < ?", (through_seq, run["workstream_id"], run["harness"], through_seq))
    row = tx.conn.execute("SELECT delivered_seq FROM workstream_harnesses WHERE workstream_id = ? AND harness = ?",
                          (run["workstream_id"], run["harness"])).fetchone()
    return {"delivered_seq": row[0] if row else 0, "advanced": cur.rowcount > 0}


@handler("workstream.rename")
def workstream_rename(tx: Tx, env: Envelope, cmd: WorkstreamRename) -> dict:
    """Rename a workstream of the scope's project. Result ``{workstream_id, name, previous}``.

    Raises:
        NotFoundError: no such workstream in this project.
        ConflictError: ``live_lease`` while a run holds it (unless ``force``).
    """
    scope = tx.scope(create=False)
    row = tx.conn.execute("SELECT name FROM workstreams WHERE id = ? AND project_id = ?",
                          (cmd.workstream_id, scope.project_id)).fetchone()
    if row is None:
        raise NotFoundError(f"workstream {cmd.workstream_id} not found", data={"workstream_id": cmd.workstream_id})
    refuse_live_lease(live_leases(tx.conn, tx.now, workstream_id=cmd.workstream_id),
                      f"workstream {row['name']}", "rename", cmd.force)
    name = " ".join(storable(cmd.name).split())
    tx.conn.execute("UPDATE workstreams SET name = ?, updated_at = ? WHERE id = ?", (name, tx.now, cmd.workstream_id))
    tx.audit("workstream.rename", cmd.workstream_id, {"from": row["name"], "to": name}, scope=scope)
    return {"workstream_id": cmd.workstream_id, "name": name, "previous": row["name"]}


@handler("workstream.delete")
def workstream_delete(tx: Tx, env: Envelope, cmd: WorkstreamDelete) -> dict:
    """Delete a workstream of the scope's project and its ledger: the events (and their text
    index), the runs, the harness cursors, and after the commit its segment folder
    ``raw/workstreams/<id>/`` (best effort, as a purge). Result ``{workstream_id, name,
    workstream_events_deleted, managed_runs_deleted, dry_run}``; a dry run changes nothing.
    Governed by ``[admission]`` as ``delete_ledger`` (asked by the caller, ahead of the writer).

    Raises:
        NotFoundError: no such workstream in this project.
        ConflictError: ``live_lease`` while a run holds it (unless ``force``; a dry run is never refused).
    """
    scope = tx.scope(create=False)
    row = tx.conn.execute("SELECT name FROM workstreams WHERE id = ? AND project_id = ?",
                          (cmd.workstream_id, scope.project_id)).fetchone()
    if row is None:
        raise NotFoundError(f"workstream {cmd.workstream_id} not found", data={"workstream_id": cmd.workstream_id})
    wid = cmd.workstream_id
    out = {"workstream_id": wid, "name": row["name"], "dry_run": cmd.dry_run,
           "workstream_events_deleted": tx.conn.execute(
               "SELECT count(*) FROM workstream_events WHERE workstream_id = ?", (wid,)).fetchone()[0],
           "managed_runs_deleted": tx.conn.execute(
               "SELECT count(*) FROM managed_runs WHERE workstream_id = ?", (wid,)).fetchone()[0]}
    if cmd.dry_run:
        return out
    refuse_live_lease(live_leases(tx.conn, tx.now, workstream_id=wid), f"workstream {row['name']}", "delete",
                      cmd.force)
    tx.conn.execute("DELETE FROM workstream_events WHERE workstream_id = ?", (wid,))  # the FTS trigger runs per row
    tx.conn.execute("DELETE FROM workstreams WHERE id = ?", (wid,))  # runs and cursors cascade
    tx.wiki.delete_raw(f"workstreams/{wid}")
    tx.audit("workstream.delete", wid, {"name": row["name"], "events": out["workstream_events_deleted"],
                                        "forced": cmd.force}, scope=scope)
    tx.emit("workstream.deleted", {"workstream_id": wid})
    return out


# -- the lease guard of lifecycle operations ---------------------------------------------------
def live_leases(conn, now: str, *, project_id: str | None = None, workstream_id: str | None = None,
                run_ids: list[str] | None = None) -> list[dict]:
    """The managed runs holding an unexpired lease (``aimem run``) in a project, a workstream,
    or among ``run_ids``: ``[{run_id, workstream_id, harness, lease_expires_at}]``."""
    where, args = ["state = 'active'", "lease_expires_at > ?"], [now]
    if project_id is not None:
        where.append("project_id = ?")
        args.append(project_id)
    if workstream_id is not None:
        where.append("workstream_id = ?")
        args.append(workstream_id)
    if run_ids is not None:
        where.append(f"id IN ({','.join('?' * len(run_ids))})" if run_ids else "0")
        args.extend(run_ids)
    return [dict(r) for r in conn.execute(
        "SELECT id AS run_id, workstream_id, harness, lease_expires_at FROM managed_runs WHERE "
        + " AND ".join(where) + " ORDER BY started_at", args)]


def refuse_live_lease(leases: list[dict], what: str, verb: str, force: bool) -> None:
    """Refuse a purge, move or rename of ``what`` while a managed run holds a live lease on it
    (the run would write into a ledger that is gone or elsewhere), unless ``force``.

    Raises:
        ConflictError: 409 ``live_lease``; ``data.runs`` lists up to 20 holders.
    """
    if leases and not force:
        raise ConflictError(f"{what} has {len(leases)} managed run(s) holding a live lease (aimem run); let them "
                            f"finish or pass force to {verb} it anyway", code="live_lease", data={"runs": leases[:20]})


# -- purges ----------------------------------------------------------------------------------
def purge_project_ledger(tx: Tx, project_id: str) -> int:
    """Delete the project's ledger events and stage the removal of its workstreams' segment
    folders (``raw/workstreams/<id>/``, after the commit); the workstreams, runs and cursors
    go with the project (cascade). Returns the events deleted."""
    for (wid,) in tx.conn.execute("SELECT id FROM workstreams WHERE project_id = ?", (project_id,)).fetchall():
        tx.wiki.delete_raw(f"workstreams/{wid}")
    # Row by row, so the FTS delete trigger runs for each.
    return tx.conn.execute("DELETE FROM workstream_events WHERE project_id = ?", (project_id,)).rowcount


def session_runs(conn, project_id: str, session_id: str) -> list[str]:
    """The managed runs of ``session_id``: runs whose ledger append named it as their native
    session, or whose child's hooks stored observations of it with their run id."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM managed_runs WHERE project_id = ? AND (native_session_id = ? OR id IN"
        " (SELECT run_id FROM observations WHERE project_id = ? AND session_id = ? AND run_id IS NOT NULL))",
        (project_id, session_id, project_id, session_id)).fetchall()]


def count_run_events(conn, run_ids: list[str]) -> int:
    """How many ledger events ``run_ids`` appended."""
    marks = ",".join("?" * len(run_ids))
    return conn.execute(f"SELECT count(*) FROM workstream_events WHERE run_id IN ({marks})", run_ids).fetchone()[0] \
        if run_ids else 0


def purge_run_events(tx: Tx, run_ids: list[str]) -> int:
    """Delete the ledger events of ``run_ids`` and stage the removal of their segments (one
    append writes one segment of one run, so no other run's event goes with them); the runs
    keep their rows (no text) and forget their native session id. Returns the events deleted."""
    if not run_ids:
        return 0
    marks = ",".join("?" * len(run_ids))
    for wid, segment in tx.conn.execute(
            f"SELECT DISTINCT workstream_id, segment FROM workstream_events WHERE run_id IN ({marks})", run_ids):
        tx.wiki.delete_raw(f"workstreams/{wid}/{segment}")
    n = tx.conn.execute(f"DELETE FROM workstream_events WHERE run_id IN ({marks})", run_ids).rowcount
    tx.conn.execute(f"UPDATE managed_runs SET native_session_id = NULL WHERE id IN ({marks})", run_ids)
    tx.conn.execute(
        "UPDATE workstream_harnesses SET native_session_id = NULL WHERE native_session_id IS NOT NULL AND"
        f" EXISTS (SELECT 1 FROM managed_runs r WHERE r.id IN ({marks}) AND r.workstream_id ="
        " workstream_harnesses.workstream_id AND r.harness = workstream_harnesses.harness)", run_ids)
    return n
