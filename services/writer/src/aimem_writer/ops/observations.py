"""``observation.append``: one sanitized hook event → sessions, observations, the ledger.

An ``imported`` observation (``aimem import``) for a session that hooks captured live is
skipped (result ``skipped: "captured_live"``): the transcript would only duplicate it. An
event of a purged session (a live purge tombstone, ``aimem_writer.tombstones``) is dropped and
counted on the tombstone (``skipped: "purged"``). A session end straight after the session's
own end that adds no text (clients that fire their end hook twice) is not stored again
(``skipped: "repeated_end"``), so its ``session.end`` finds nothing new and changes nothing.

The hot path (thousands per second): one session upsert, one observation insert (FTS by
trigger; ``observations_tri`` too when the text holds an unspaced script) and a ledger line
staged for ``log-YYYY-MM.md``. An event that happened after its session was ended reopens
the session (``ended_at`` back to NULL; the ended watermark stays, so the next end
re-renders the page). A ``parent_session_id`` (OpenCode's child sessions) is remembered on
the session: a child never claims nor opens a handoff (docs/lifecycle.md). The text is
re-checked with the redactor: a command that still carries a secret is refused with
``unsanitized`` (DESIGN.md invariant 6) and nothing of it is stored.
"""

from __future__ import annotations

from aimem_common.db.trigram import index_observation_tri
from aimem_common.errors import BadRequestError
from aimem_common.commands import Envelope
from aimem_common.commands.observations import ObservationAppend
from aimem_common.redact import contains_secret
from aimem_common.wikifmt import event_timestamp

from aimem_writer.registry import handler
from aimem_writer.tombstones import refuse
from aimem_writer.tx import Tx

LEDGER_EXCERPT_CHARS = 240
TEXT_FIELDS = ("title", "body", "cwd", "tool_name")


def occurred(tx: Tx, value: str | None) -> str:
    """Return the event time as ISO UTC in the one fixed-width form (``event_timestamp``:
    always microseconds), the batch time when absent or unparseable. Every event time of
    sessions, observations and handoffs is stored through here."""
    if not value:
        return tx.now
    try:
        return event_timestamp(value)
    except BadRequestError:
        return tx.now


def ledger_entry(at: str, kind: str, agent: str, session_id: str, title: str, body: str = "") -> str:
    """Render one hook ledger entry (``## [timestamp] kind · agent · session``)."""
    text = " ".join((title or body or "").split())
    if len(text) > LEDGER_EXCERPT_CHARS:
        text = text[: LEDGER_EXCERPT_CHARS - 1] + "…"
    at = at.replace(".000000Z", "Z")  # the ledger keeps its readable form for whole seconds
    return f"## [{at}] {kind} · {agent} · session {session_id}\n\n{text}\n\n"


@handler("observation.append")
def observation_append(tx: Tx, env: Envelope, cmd: ObservationAppend) -> dict:
    """Store one observation and bump its session. Result ``{observation_id, session_id}``."""
    fields = {name: getattr(cmd, name) for name in TEXT_FIELDS}
    # One redactor pass over all fields (the hot path); per field only when it finds one. A
    # hit of the joined text alone (a private-key header in the title, key-like characters in
    # the cwd) was made by the join: each field is stored apart and was sanitized apart at
    # the ingress, which answered 202 for it.
    if contains_secret("\n\n".join(v for v in fields.values() if v)):
        name = next((n for n, value in fields.items() if value and contains_secret(value)), None)
        if name is not None:
            raise BadRequestError(
                f"observation {name} still contains a secret; sanitize() it before sending",
                code="unsanitized", data={"field": name},
            )
    at = occurred(tx, cmd.occurred_at)
    if refuse(tx, cmd.session_id, at) is not None:  # purged: dropped and counted, never stored
        return {"observation_id": None, "session_id": cmd.session_id, "skipped": "purged"}
    scope = tx.scope(create=True)
    if cmd.imported and _captured_live(tx, scope.project_id, cmd.session_id):
        return {"observation_id": None, "session_id": cmd.session_id, "skipped": "captured_live"}
    kind = str(cmd.kind)
    if kind == "session-end" and _repeated_end(tx, scope.project_id, cmd):
        return {"observation_id": None, "session_id": cmd.session_id, "skipped": "repeated_end"}
    root = env.scope.root if env.scope is not None else None
    # An event that happened after the session was finalised (idle, or a client that ended
    # and then resumed it) reopens it; a late delivery of an earlier event does not.
    tx.conn.execute(
        "INSERT INTO sessions(workspace_id, project_id, session_id, agent, cwd, model, started_at,"
        " last_event_at, observation_count, imported_count, root, parent_session_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)"
        " ON CONFLICT(project_id, session_id) DO UPDATE SET"
        " observation_count = observation_count + 1,"
        " imported_count = imported_count + excluded.imported_count,"
        " last_event_at = max(last_event_at, excluded.last_event_at),"
        " started_at = min(started_at, excluded.started_at),"
        " cwd = coalesce(sessions.cwd, excluded.cwd),"
        " root = coalesce(sessions.root, excluded.root),"
        " parent_session_id = coalesce(sessions.parent_session_id, excluded.parent_session_id),"
        " model = coalesce(excluded.model, sessions.model),"
        " end_reason = CASE WHEN sessions.ended_at IS NOT NULL AND excluded.last_event_at > sessions.ended_at"
        "   THEN NULL ELSE sessions.end_reason END,"
        " ended_at = CASE WHEN sessions.ended_at IS NOT NULL AND excluded.last_event_at > sessions.ended_at"
        "   THEN NULL ELSE sessions.ended_at END",
        (scope.workspace_id, scope.project_id, cmd.session_id, cmd.agent, cmd.cwd, cmd.model, at, at,
         int(cmd.imported), root, cmd.parent_session_id),
    )
    obs_id = tx.conn.execute(
        "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, cwd, title, body,"
        " tool_name, source_event, extension, occurred_at, created_at, cmd_id, run_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (scope.workspace_id, scope.project_id, cmd.session_id, kind, cmd.agent, cmd.cwd, cmd.title, cmd.body,
         cmd.tool_name, cmd.source_event, cmd.extension, at, tx.now, tx.cmd_id, cmd.run_id),
    ).lastrowid
    index_observation_tri(tx.conn, obs_id, cmd.title, cmd.body)  # CJK/Thai/... words: migration 13
    tx.wiki.append_ledger(scope, at[:7], ledger_entry(at, kind, cmd.agent, cmd.session_id, cmd.title, cmd.body))
    # One event per session per batch after coalescing (settlement.coalesce_events): live views.
    tx.emit("observations.appended", {"session_id": cmd.session_id, "count": 1, "last_observation_id": obs_id,
                                      "kinds": [kind]})
    return {"observation_id": obs_id, "session_id": cmd.session_id}


def _captured_live(tx: Tx, project_id: str, session_id: str) -> bool:
    """True when hooks already stored events of this session (any non-imported observation).

    The hooks saw the session as it happened, so its transcript adds nothing but
    duplicates: imported observations for it are skipped (DESIGN.md "Transcript import").
    """
    row = tx.conn.execute(
        "SELECT observation_count - imported_count FROM sessions WHERE project_id = ? AND session_id = ?",
        (project_id, session_id),
    ).fetchone()
    return bool(row and row[0] > 0)


def _repeated_end(tx: Tx, project_id: str, cmd: ObservationAppend) -> bool:
    """True when the session's last stored event is a session end and this one adds no text:
    a client that fires its end hook twice on exit (nothing happened in between).

    An end that carries text the first did not (a transcript tail) is stored.
    """
    row = tx.conn.execute(
        "SELECT kind, title, body FROM observations WHERE project_id = ? AND session_id = ? ORDER BY id DESC LIMIT 1",
        (project_id, cmd.session_id)).fetchone()
    if row is None or row["kind"] != "session-end":
        return False
    body = (cmd.body or "").strip()
    return not body or body == (cmd.title or "").strip() or body == (row["body"] or "").strip()
