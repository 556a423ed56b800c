"""Migration 14: the session and handoff lifecycle: ownerless automatic handoffs, event-time ordering, children."""

from __future__ import annotations

# The session and handoff lifecycle (docs/lifecycle.md, issue 26). An automatic handoff
# belongs to its place, not to the actor that wrote it (the idle finaliser's ``maintainer``
# made them unclaimable): its owner is cleared. Handoffs are ordered by the events' own
# time: ``event_at`` is when the source session's work ended (its end's event time; for a
# manual handoff its begin), ``started_at`` when that session began, so a claim can tell a
# chain (one session began after the other ended) from sessions that ran in parallel.
# ``sessions.parent_session_id``: a child session (OpenCode ``parentID``) never claims a
# handoff and never opens one.
SQL = """
ALTER TABLE handoffs ADD COLUMN event_at TEXT;
ALTER TABLE handoffs ADD COLUMN started_at TEXT;
ALTER TABLE sessions ADD COLUMN parent_session_id TEXT;
UPDATE handoffs SET owner = NULL WHERE automatic = 1;
UPDATE handoffs SET
  event_at = coalesce((SELECT s.ended_at FROM sessions s
                       WHERE s.project_id = handoffs.project_id AND s.session_id = handoffs.from_session_id
                         AND handoffs.automatic = 1), created_at),
  started_at = (SELECT s.started_at FROM sessions s
                WHERE s.project_id = handoffs.project_id AND s.session_id = handoffs.from_session_id
                  AND handoffs.automatic = 1);
"""
