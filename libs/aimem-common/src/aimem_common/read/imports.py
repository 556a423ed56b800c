"""What the store already knows about a batch of imported events (``POST /hook/import``).

Ingress asks before it publishes a batch, so the importer's summary can say which events are
new, which were there already and which belong to a session that hooks captured live (DESIGN.md
"Hook ingress": live capture wins). It is what the store knew when the batch arrived; the
writer applies the same "captured live" rule again when it applies each event.

Sync functions over a read connection (``ReaderPool.run``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from aimem_common.read import scopes

_CHUNK = 500  # SQLite host parameters per IN (...) query


@dataclass(slots=True)
class ImportKnown:
    """``applied``: idempotency keys the writer has applied (``ingest_keys``); ``live``: session
    ids of the project with observations captured by hooks (not imported)."""

    applied: set[str] = field(default_factory=set)
    live: set[str] = field(default_factory=set)


def import_known(conn: sqlite3.Connection, workspace: str, project: str, *, root: str | None,
                 origin: str | None, explicit: bool, keys: list[str], session_ids: list[str],
                 repo_id: str | None = None) -> ImportKnown:
    """Return which of ``keys`` are applied and which of ``session_ids`` hooks captured live in the
    project the batch lands in (``scopes.lookup``: none yet means no session of it is live).

    Shape: ``ImportKnown``; both sets are subsets of the arguments. Reads ``ingest_keys`` and
    ``sessions`` (indexed lookups, ``_CHUNK`` values per query).
    """
    known = ImportKnown()
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i:i + _CHUNK]
        q = "SELECT key FROM ingest_keys WHERE key IN (%s)" % ",".join("?" * len(chunk))
        known.applied.update(r[0] for r in conn.execute(q, chunk))
    scope = scopes.lookup(conn, workspace, project, root=root, origin=origin, explicit=explicit, repo_id=repo_id)
    if scope is None:
        return known
    sids = sorted(set(session_ids))
    for i in range(0, len(sids), _CHUNK):
        chunk = sids[i:i + _CHUNK]
        q = ("SELECT session_id FROM sessions WHERE project_id = ? AND observation_count > imported_count"
             " AND session_id IN (%s)" % ",".join("?" * len(chunk)))
        known.live.update(r[0] for r in conn.execute(q, [scope.project_id, *chunk]))
    return known
