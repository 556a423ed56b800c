"""Trigram-index helpers the writer runs: which text is unspaced script, and how it is indexed.

The shipped migrations (``db.schema``) hold the same SQL as frozen literals; these helpers serve
the run time (the observation insert path, a project's index rebuild) and must index exactly as
those migrations' triggers do (``tests/unit/test_schema.py`` checks they still agree).
"""

from __future__ import annotations

import re
import sqlite3

# Scripts written without spaces between words (CJK ideographs, kana, Hangul, Thai, Lao,
# Myanmar, Khmer): a page holding any such character is also indexed by ``pages_tri``. A GLOB
# character class, so the triggers need no application function (any connection can write).
UNSPACED_GLOB = "*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*"

# A page row belongs in ``pages_tri`` when its text holds an unspaced-script character.
# An all-ASCII text (byte length = character length, ~3 µs for 1.5 KB) skips the GLOB
# (~200 µs for 1.5 KB): CASE evaluates its branches lazily, AND does not.
_TRI_TEXT = "(coalesce({r}.title, '') || ' ' || coalesce({r}.body, ''))"
_TRI = ("CASE WHEN length(CAST(" + _TRI_TEXT + " AS BLOB)) = length(" + _TRI_TEXT + ") THEN 0"
        " ELSE " + _TRI_TEXT + " GLOB '" + UNSPACED_GLOB + "' END")


def unspaced_sql(row: str) -> str:
    """SQL predicate: the page row ``row`` (an alias, ``new``, ``old``) belongs in ``pages_tri``."""
    return _TRI.format(r=row)


# Each column of ``pages_tri``/``observations_tri`` is indexed with ``TRI_PAD`` (two spaces)
# appended, so a word in a column's last two characters or a column of 1–2 characters still has
# a trigram starting with it (schema migration 12).
TRI_PAD = "  "


def _tri_cols(row: str) -> str:
    return f"coalesce({row}.title, '') || '{TRI_PAD}', coalesce({row}.body, '') || '{TRI_PAD}'"


def pages_tri_insert_sql(row: str = "pages") -> str:
    """SQL that indexes every live unspaced-script page of table/alias ``row`` into ``pages_tri``
    (padded as its triggers index them): for a rebuild after ``'delete-all'``."""
    return (f"INSERT INTO pages_tri(rowid, title, body) SELECT {row}.id, {_tri_cols(row)} FROM pages {row}"
            f" WHERE {row}.is_latest = 1 AND {_TRI.format(r=row)}")


# An observation is in ``observations_tri`` exactly when its ``_docsize`` shadow table holds its
# rowid (schema migration 13): a 'delete' is only sent for such a row.
_OBS_TRI_HELD = "EXISTS (SELECT 1 FROM observations_tri_docsize WHERE id = {r}.id)"
_UNSPACED_CHAR = re.compile(UNSPACED_GLOB[1:-1])  # the GLOB's character class, as a regex


def unspaced(text: str | None) -> bool:
    """True when ``text`` holds an unspaced-script character (``UNSPACED_GLOB``'s class)."""
    return bool(text) and not text.isascii() and _UNSPACED_CHAR.search(text) is not None


def index_observation_tri(conn: sqlite3.Connection, obs_id: int, title: str | None, body: str | None) -> bool:
    """Index the just-inserted observation ``obs_id`` into ``observations_tri`` when its title or
    body holds an unspaced-script character (padded as the delete trigger removes it).

    Call it in the transaction that inserted the row, once per row. Returns whether it indexed.
    Cost: ``str.isascii`` for ASCII text (~0.4 µs), a regex search otherwise (~16 µs for 1.5 KB).
    """
    if not (unspaced(title) or unspaced(body)):
        return False
    conn.execute("INSERT INTO observations_tri(rowid, title, body) VALUES (?, ?, ?)",
                 (obs_id, (title or "") + TRI_PAD, (body or "") + TRI_PAD))
    return True


def observations_tri_insert_sql(row: str = "o") -> str:
    """SQL that indexes every unspaced-script observation into an empty ``observations_tri``
    (padded as ``index_observation_tri``); needs the ``aimem_unspaced`` function (``connect.migrate``)."""
    return (f"INSERT INTO observations_tri(rowid, title, body) SELECT {row}.id, {_tri_cols(row)}"
            f" FROM observations {row} WHERE aimem_unspaced({row}.title) OR aimem_unspaced({row}.body)")


def rebuild_observations_tri(conn: sqlite3.Connection) -> int:
    """Empty ``observations_tri`` and index every observation that qualifies again (a compaction).

    Side effect: writes inside the caller's transaction. Returns the rows indexed.
    """
    conn.execute("INSERT INTO observations_tri(observations_tri) VALUES ('delete-all')")
    n = 0
    # Only non-ASCII text can qualify; SQLite's byte/character length test skips the rest.
    for oid, title, body in conn.execute(
            "SELECT id, title, body FROM observations"
            " WHERE length(CAST(title || body AS BLOB)) != length(title || body)").fetchall():
        n += index_observation_tri(conn, oid, title, body)
    return n
