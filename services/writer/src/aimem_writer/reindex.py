"""Index wiki files into SQLite: hand edits (watcher) and the full ``aimem reindex`` rebuild.

* ``index_hand_edits(applier, rels)`` — writer thread: one transaction for a debounced set of
  changed files; unchanged content (the writer's own writes) is a no-op, a removed file
  retires its page, malformed files are logged and skipped.
* ``rebuild(data_dir)`` — direct-disk: refuses while a writer is alive or when the DB has
  rows, then recreates workspaces/projects from ``_meta.md`` (keeping their UUIDs) and the
  latest pages, links, entities and FTS from the markdown files, and the purge tombstones
  from ``_purges.jsonl`` (a purged session's page that is still on disk is skipped, not
  indexed; refusal counts live only in SQLite). Sessions, observations, handoffs, audit
  rows and access counters live only in SQLite and are not rebuilt.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

from aimem_common.config import Settings
from aimem_common.db.connect import open_writer
from aimem_common.errors import AimemError, ConflictError, NotFoundError
from aimem_common.commands import Envelope, ScopeRef
from aimem_common.wikifmt import META_FILE, is_ledger_name, parse_meta

from aimem_writer.lock import WriterLock
from aimem_writer.tx import Event, ScopeCache, Tx, utc_now
from aimem_writer.wiki import TMP_PREFIX, WikiRepo, WikiStage, check_inside

log = logging.getLogger("aimem.writer.reindex")


def _tx(conn, settings: Settings, root: Path, scope=None, actor: str = "wiki-watcher") -> Tx:
    env = Envelope(op="wiki.reindex", actor=actor,
                   scope=ScopeRef(workspace=scope.workspace, project=scope.project) if scope else None)
    return Tx(conn, env, now=utc_now(), settings=settings, wiki=WikiStage(root), scopes=ScopeCache())


def index_hand_edits(applier, rels: list[str]) -> list[Event]:
    """Reindex the page files ``rels`` (``<ws_id>/<pj_id>/<path>``) edited outside the writer.

    Runs on the writer thread, one transaction. Returns the events to publish.
    """
    conn, wiki = applier.conn, applier.wiki
    events: list[Event] = []
    changed = 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        for rel in rels:
            ws_id, pj_id, path = rel.split("/", 2)
            probe = _tx(conn, applier.settings, wiki.root)
            try:
                scope = probe.scope_by_ids(ws_id, pj_id)
            except NotFoundError:
                applier.metrics.watcher_reindexed.labels("unknown_scope").inc()
                continue
            tx = _tx(conn, applier.settings, wiki.root, scope)
            abs_path = wiki.root / rel
            conn.execute("SAVEPOINT hand")
            try:
                check_inside(wiki.root, rel)
                if abs_path.is_file():
                    text = abs_path.read_text(encoding="utf-8")
                    res = tx.pages.index_text(scope, path, text)
                    outcome = "indexed" if res["changed"] else "unchanged"
                else:
                    res = tx.pages.delete(scope, path, reason="deleted on disk")
                    outcome = "deleted" if res["deleted"] else "unchanged"
                conn.execute("RELEASE hand")
            except (AimemError, UnicodeDecodeError, OSError) as exc:
                conn.execute("ROLLBACK TO hand")
                conn.execute("RELEASE hand")
                log.warning("hand edit of %s not indexed: %s", rel, exc)
                purged = isinstance(exc, AimemError) and exc.code == "purged"  # a purged session's page
                applier.metrics.watcher_reindexed.labels("purged" if purged else "invalid").inc()
                continue
            applier.metrics.watcher_reindexed.labels(outcome).inc()
            if outcome != "unchanged":
                changed += 1
                wiki.mark_dirty(rel)
                events.extend(tx.events)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    applier.sync_text_index()
    if changed:
        from collections import Counter

        wiki.note_ops(Counter({"wiki.hand_edit": changed}))
    return events


@dataclass(slots=True)
class RebuildReport:
    """What ``rebuild`` indexed."""

    workspaces: int = 0
    projects: int = 0
    pages: int = 0
    skipped: list[str] = field(default_factory=list)


def db_has_rows(conn: sqlite3.Connection) -> bool:
    """Return True when any workspace, project or page row exists."""
    for table in ("workspaces", "projects", "pages"):
        if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
            return True
    return False


def rebuild(settings: Settings) -> RebuildReport:
    """Rebuild an empty DB from ``<data_dir>/wiki`` (see module docstring).

    Raises:
        ConflictError: ``writer_alive`` (a writer holds the lock) or ``db_not_empty``.
        NotFoundError: ``wiki_missing`` — no wiki directory; ``meta_missing`` — a project
            directory without ``_meta.md`` (the message names its path).
    """
    root = settings.wiki_dir
    if not root.is_dir():
        raise NotFoundError(f"no wiki at {root}", code="wiki_missing")
    lock = WriterLock(settings.data_dir).acquire()
    try:
        conn = open_writer(settings.db_path)
        try:
            if db_has_rows(conn):
                raise ConflictError(
                    f"database {settings.db_path} already has rows; move it aside first (reindex rebuilds "
                    "into an empty DB only)", code="db_not_empty",
                )
            return _rebuild(conn, settings, root)
        finally:
            conn.close()
    finally:
        lock.release()


def _rebuild(conn: sqlite3.Connection, settings: Settings, root: Path) -> RebuildReport:
    report = RebuildReport()
    now = utc_now()
    conn.execute("BEGIN IMMEDIATE")
    try:
        scopes = []
        for ws_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            meta = ws_dir / META_FILE
            if not meta.is_file():
                raise NotFoundError(f"missing workspace manifest {meta}", code="meta_missing")
            wm = parse_meta(meta.read_text(encoding="utf-8"))
            conn.execute("INSERT INTO workspaces(id, name, created_at) VALUES (?, ?, ?)",
                         (ws_dir.name, wm["name"], now))
            report.workspaces += 1
            for pj_dir in sorted(p for p in ws_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                pmeta = pj_dir / META_FILE
                if not pmeta.is_file():
                    raise NotFoundError(f"missing project manifest {pmeta}", code="meta_missing")
                pm = parse_meta(pmeta.read_text(encoding="utf-8"))
                conn.execute("INSERT INTO projects(id, workspace_id, name, created_at, root, origin, repo_id)"
                             " VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (pj_dir.name, ws_dir.name, pm["name"], now, pm.get("root"), pm.get("origin"),
                              pm.get("repo_id")))
                for alias in pm.get("aliases") or []:  # the roots a moved or second checkout added
                    if isinstance(alias, str) and alias:
                        conn.execute("INSERT OR IGNORE INTO project_roots(workspace_id, project_id, root,"
                                     " first_seen_at) VALUES (?, ?, ?, ?)", (ws_dir.name, pj_dir.name, alias, now))
                report.projects += 1
                scopes.append((wm["name"], pm["name"], ws_dir.name, pj_dir.name, pj_dir))
        from aimem_common.models import Scope

        from aimem_writer.tombstones import restore_from_wiki

        restore_from_wiki(conn, root)  # before the pages: a purged session's page stays out
        for ws_name, pj_name, wid, pid, pj_dir in scopes:
            scope = Scope(ws_name, pj_name, wid, pid)
            tx = _tx(conn, settings, root, scope, actor="reindex")
            for f in sorted(pj_dir.rglob("*.md")):
                rel_in = f.relative_to(pj_dir).as_posix()
                if (any(part.startswith(".") for part in rel_in.split("/")) or f.name.startswith(TMP_PREFIX)
                        or rel_in == META_FILE or ("/" not in rel_in and is_ledger_name(rel_in))):
                    continue
                conn.execute("SAVEPOINT f")
                try:
                    check_inside(root, f"{wid}/{pid}/{rel_in}")
                    tx.pages.index_text(scope, rel_in, f.read_text(encoding="utf-8"))
                    conn.execute("RELEASE f")
                    report.pages += 1
                except (AimemError, UnicodeDecodeError, OSError) as exc:
                    conn.execute("ROLLBACK TO f")
                    conn.execute("RELEASE f")
                    report.skipped.append(f"{f}: {exc}")
        # The text index is rebuilt in bulk by the writer's next start (the old one belongs to
        # the DB that was moved aside), not page by page from the outbox.
        conn.execute("DELETE FROM search_outbox")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    from aimem_writer.textindex import reset

    reset(settings.search_dir)
    WikiRepo(root)  # ensure the repository and .gitignore exist
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m aimem_writer.reindex --data-dir DIR`` (what ``aimem reindex`` runs).

    Prints ``reindexed N pages in P projects of W workspaces from <wiki>`` and one
    ``skipped <path: reason>`` line on stderr per file left out; returns 0. On a refusal
    (a live writer, rows in the DB, no wiki) prints ``aimem reindex: <reason>`` on stderr
    and returns 1.
    """
    import argparse

    from aimem_common import config

    parser = argparse.ArgumentParser(prog="aimem reindex", description="Rebuild an empty SQLite index from the wiki.")
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        settings = config.load(args.data_dir, check_writable=True)
        report = rebuild(settings)
    except AimemError as exc:
        print(f"aimem reindex: {exc.message}", file=sys.stderr)
        return 1
    print(f"reindexed {report.pages} pages in {report.projects} projects of {report.workspaces} workspaces "
          f"from {settings.wiki_dir}")
    for line in report.skipped:
        print(f"skipped {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
