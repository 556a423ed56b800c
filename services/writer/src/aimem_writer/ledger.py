"""The writer's ledger SQL.

``ingest_keys`` (the stored reply of each applied command) and ``dead_letters`` (commands given
up, kept whole to replay). Writer thread, caller's transaction.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable
from typing import Any

import orjson

from aimem_common.bus import REPLAY_HEADER
from aimem_common.bus.codec import reply_body
from aimem_common.commands import Envelope
from aimem_common.errors import GoneError

from aimem_writer.commands import Incoming, Outcome

_REASON_MAX = 2000  # characters of a dead letter's reason kept


def reply_json(reply: dict[str, Any]) -> str:
    """``reply`` as JSON text for ``ingest_keys`` (orjson; ``json`` for what it refuses, such
    as an integer beyond 64 bits)."""
    try:
        return orjson.dumps(reply, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(reply, ensure_ascii=False)


def stored_replies(conn: sqlite3.Connection, keys: set[str]) -> dict[str, dict]:
    """Return the stored replies of already-applied keys (crash replays, late retries)."""
    out: dict[str, dict] = {}
    keys_l = list(keys)
    for start in range(0, len(keys_l), 900):
        chunk = keys_l[start : start + 900]
        q = "SELECT key, result FROM ingest_keys WHERE key IN (%s)" % ",".join("?" * len(chunk))
        for key, result in conn.execute(q, chunk):
            try:
                out[key] = json.loads(result) if result else {"ok": True, "result": {}}
            except ValueError:
                out[key] = {"ok": True, "result": {}}
    return out


def record_reply(conn: sqlite3.Connection, key: str, env: Envelope, reply: dict[str, Any], now: str,
                 project_id: str | None = None) -> None:
    """Store ``reply`` as the answer of ``key`` (``ingest_keys``): a re-sent command gets it again.

    ``project_id``: the project the command's scope resolved to (None when unscoped), so a
    purge of that project finds the replies to forget (``aimem_writer.forget``)."""
    conn.execute(
        "INSERT INTO ingest_keys(key, cmd_id, op, result, created_at, project_id) VALUES (?, ?, ?, ?, ?, ?)",
        (key, env.cmd_id, env.op, reply_json(reply), now, project_id),
    )


def amend_replies(conn: sqlite3.Connection, replies: list[tuple[str, dict[str, Any]]]) -> None:
    """Replace the stored replies of already committed keys (autocommit, after the batch's
    commit): a purge learns only after its commit that some files stayed on disk, and a
    re-sent purge must be answered with that outcome (``partial_failure``), not the reply
    stored before the files were touched. A crash between the commit and this update leaves
    the committed reply (the rows are purged either way)."""
    for key, reply in replies:
        conn.execute("UPDATE ingest_keys SET result = ? WHERE key = ?", (reply_json(reply), key))


def replayed_id(headers: dict[str, str]) -> int | None:
    """The dead-letter id a message replays (``REPLAY_HEADER``), None when it is no replay."""
    value = headers.get(REPLAY_HEADER)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def insert_unreadable(conn: sqlite3.Connection, item: Incoming, outcome: Outcome, now: str) -> bool:
    """Keep a command that is no envelope as a dead letter (op ``unknown``), once per text.

    Returns:
        True when a row was added (False: an open dead letter already holds this text).
    """
    text = item.data.decode("utf-8", "replace")
    if conn.execute("SELECT 1 FROM dead_letters WHERE replayed_at IS NULL AND envelope = ?",
                    (text,)).fetchone():
        return False
    cmd_id = str((outcome.reply or {}).get("cmd_id") or "")
    conn.execute(
        "INSERT INTO dead_letters(cmd_id, op, envelope, reason, error_code, deliveries, created_at)"
        " VALUES (?, 'unknown', ?, ?, ?, ?, ?)",
        (cmd_id, text, outcome.dead_letter[:_REASON_MAX], outcome.error_code or "invalid_envelope",
         item.num_delivered, now),
    )
    return True


def insert_dead_letter(conn: sqlite3.Connection, item: Incoming, env: Envelope, reason: str, code: str,
                       now: str) -> bool:
    """Keep ``env`` as a dead letter, once: a command given up again while its dead letter
    is open — a bundle redelivered for a sibling's sake runs it again (it is not in
    ``ingest_keys``), and a client's retries of it with its idempotency key reach the
    writer as copies when they were gathered into bundles — updates that row's reason and
    delivery count instead of adding one (open dead letters are few: the scan is cheap).

    A replay (``REPLAY_HEADER``: the id of the dead letter it sends again) that fails is
    never folded into that row: the replay's ``dead_letter.resolve`` follows it on the
    stream and marks that row replayed, so the failure gets a row of its own (its
    redeliveries then update that one).

    Returns:
        True when a row was added (False: an open row was updated).
    """
    replay_of = replayed_id(item.headers)
    again = conn.execute(
        "UPDATE dead_letters SET reason = :reason, error_code = :code, deliveries = max(deliveries, :n)"
        " WHERE replayed_at IS NULL AND id IS NOT :replayed AND (cmd_id = :cmd"
        " OR (:key IS NOT NULL AND json_extract(envelope, '$.idempotency_key') = :key))",
        {"reason": reason[:_REASON_MAX], "code": code, "n": item.num_delivered, "cmd": env.cmd_id,
         "key": env.idempotency_key, "replayed": replay_of},
    )
    if again.rowcount:
        return False
    conn.execute(
        "INSERT INTO dead_letters(cmd_id, op, workspace, project, envelope, reason, error_code, deliveries,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (env.cmd_id, env.op, env.scope.workspace if env.scope else None, env.scope.project if env.scope else None,
         item.data.decode("utf-8", "replace"), reason[:_REASON_MAX], code, item.num_delivered, now),
    )
    return True


def open_dead_letters(conn: sqlite3.Connection) -> int:
    """Return how many dead letters are not yet replayed."""
    return int(conn.execute("SELECT count(*) FROM dead_letters WHERE replayed_at IS NULL").fetchone()[0])


# -- forgetting (a purge's stored replies and dead letters; aimem_writer.forget) ---------------
# A JSON document (reply or envelope) naming one of the sessions in the JSON array bound to
# its one ``?`` under any key ending in ``session_id`` (session_id, from_session_id, …).
_NAMES_SESSION = (
    "json_valid({col}) AND EXISTS (SELECT 1 FROM json_tree({col}) t, json_each(?) s"
    " WHERE t.key LIKE '%session_id' AND t.type = 'text' AND t.atom = s.value)"
)
_PREFILTER_MAX = 50  # up to this many session ids, SQL narrows the rows by substring; more: one regex pass


def purged_reply(cmd_id: str, tombstone_hint: str) -> str:
    """The stored reply that replaces one naming purged data (JSON text of ``reply_body``)."""
    err = GoneError(f"the reply of this command held data that was purged ({tombstone_hint}); it is not kept",
                    data={"forgotten": True})
    return reply_json(reply_body(cmd_id, error=err))


def forget_replies(conn: sqlite3.Connection, *, session_ids: Iterable[str], project_ids: Iterable[str] = (),
                   hint: str) -> int:
    """Replace the stored replies of the purged projects' commands and of every command whose
    reply names a purged session; return how many rows were rewritten."""
    sids, pids = sorted(set(session_ids)), sorted(set(project_ids))
    n = 0
    if pids:
        rows = conn.execute(
            f"SELECT key, cmd_id FROM ingest_keys WHERE project_id IN ({','.join('?' * len(pids))})"
            " AND (result IS NULL OR json_extract(result, '$.error.code') IS NOT 'purged')", pids).fetchall()
        n += _rewrite(conn, rows, hint)
    if len(sids) > _PREFILTER_MAX:
        # Many sessions (a project's): one pass, a regex over the JSON text, then a parse of the hits.
        wanted = set(sids)
        quoted = re.compile("|".join(re.escape(json.dumps(sid, ensure_ascii=False)) for sid in sids))
        rows = [(key, cmd_id) for key, cmd_id, result in conn.execute(
            "SELECT key, cmd_id, result FROM ingest_keys WHERE result IS NOT NULL")
            if quoted.search(result) and _names_session(_loads(result), wanted)]
        n += _rewrite(conn, rows, hint)
    elif sids:
        # Every project: a handoff of the purged session may have been accepted elsewhere.
        prefilter = " OR ".join("instr(result, ?) > 0" for _ in sids)
        rows = conn.execute(
            f"SELECT key, cmd_id FROM ingest_keys WHERE result IS NOT NULL AND ({prefilter})"
            " AND json_extract(result, '$.error.code') IS NOT 'purged' AND " + _NAMES_SESSION.format(col="result"),
            (*sids, json.dumps(sids))).fetchall()
        n += _rewrite(conn, rows, hint)
    return n


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _names_session(doc, wanted: set[str]) -> bool:
    """Whether a parsed reply names one of ``wanted`` under a key ending in ``session_id``
    (what ``_NAMES_SESSION`` asks in SQL); a marker already written does not count."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and doc["error"].get("code") == "purged":
        return False
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str):
                    if k.endswith("session_id") and v in wanted:
                        return True
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return False


def forget_profile_replies(conn: sqlite3.Connection, entry_ids: Iterable[int], *, hint: str) -> int:
    """Replace the stored replies of ``profile.add`` that answered with one of these entries
    (removed, purged with where they were stated, or their owner deleted); return how many."""
    ids = sorted(set(entry_ids))
    if not ids:
        return 0
    rows = conn.execute(
        "SELECT key, cmd_id FROM ingest_keys WHERE op = 'profile.add' AND json_valid(result)"
        " AND json_extract(result, '$.result.entry.id') IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),)).fetchall()
    return _rewrite(conn, rows, hint)


def _rewrite(conn: sqlite3.Connection, rows: list, hint: str) -> int:
    for key, cmd_id in rows:
        conn.execute("UPDATE ingest_keys SET result = ? WHERE key = ?", (purged_reply(cmd_id, hint), key))
    return len(rows)


def forget_dead_letters(conn: sqlite3.Connection, *, session_ids: Iterable[str],
                        places: Iterable[tuple[str, str | None]] = ()) -> int:
    """Delete the dead letters of the purged places (``(workspace, project)`` names; project
    None = the whole workspace) and those whose envelope names a purged session."""
    n = 0
    for workspace, project in places:
        if project is None:
            n += conn.execute("DELETE FROM dead_letters WHERE workspace = ?", (workspace,)).rowcount
        else:
            n += conn.execute("DELETE FROM dead_letters WHERE workspace = ? AND project = ?",
                              (workspace, project)).rowcount
    sids = sorted(set(session_ids))
    if sids:
        n += conn.execute("DELETE FROM dead_letters WHERE " + _NAMES_SESSION.format(col="envelope"),
                          (json.dumps(sids),)).rowcount
    return n
