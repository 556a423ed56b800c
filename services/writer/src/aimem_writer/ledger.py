"""The writer's ledger SQL.

``ingest_keys`` (the stored reply of each applied command) and ``dead_letters`` (commands given
up, kept whole to replay). Writer thread, caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import orjson

from aimem_common.bus import REPLAY_HEADER
from aimem_common.commands import Envelope

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
