"""``aimem restore --from-replica``: a new node's data dir from the off-node copies.

Direct-disk (refuses while a writer holds the data dir's lock, and unless the data dir has
no DB and no wiki yet):

1. clone the wiki remote (libgit2) into ``<data_dir>/wiki`` (full history);
2. ``litestream restore`` the newest replicated DB into ``<data_dir>/db/memory.sqlite``;
3. ``reconcile``: the two copies were taken at different moments. The DB names the wiki
   commit it had caught up with (``meta.wiki_commit``); the wiki is the source of truth:

   * commit known to the clone (the wiki is as new or newer): every page file changed
     between that commit and HEAD is reindexed into the DB (a file gone retires its page);
   * commit unknown (the DB is newer than the last push) or pages the DB holds that the
     wiki lacks: the DB's version of those pages is written back into the wiki;
   * scopes whose ``_meta.md`` one side lacks are created on the other.

   Then one git checkpoint records the result (and ``meta.wiki_commit``);
4. the managed workstreams' ledger segments (``raw/workstreams/``), which neither replica
   holds, are written from the restored rows (``aimem_common.archive.reconcile_segments``).

With only a git remote the DB is rebuilt from the wiki (``reindex.rebuild``: sessions,
observations and handoffs are then lost); with only a bucket the wiki is written from the DB.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from aimem_common import wikifmt
from aimem_common.archive import reconcile_segments
from aimem_common.config import Settings, child_environ
from aimem_common.read import scopes
from aimem_common.db.connect import open_writer
from aimem_common.errors import AimemError, BadRequestError, ConflictError, UnavailableError
from aimem_common.replication import litestream_binary, litestream_env, write_litestream_config
from aimem_common.telemetry import Telemetry

from aimem_writer.batch import Applier, read_wiki_commit
from aimem_writer.lock import WriterLock
from aimem_writer.metrics import WriterMetrics
from aimem_writer.page_store import WRITER_KEYS
from aimem_writer.reindex import index_hand_edits, rebuild
from aimem_writer.replicate import RemoteCallbacks
from aimem_writer.watcher import candidate_rel
from aimem_writer.wiki import WikiRepo, atomic_write

log = logging.getLogger("aimem.writer.restore")


@dataclass(slots=True)
class RestoreReport:
    """What a restore did; times in seconds."""

    db_restored: bool = False
    wiki_cloned: bool = False
    db_wiki_commit: str | None = None  # what the restored DB said it matched
    wiki_head: str | None = None  # the clone's HEAD before reconciling
    reindexed: list[str] = field(default_factory=list)  # wiki → DB
    written_back: list[str] = field(default_factory=list)  # DB → wiki
    scopes_created: int = 0
    final_commit: str | None = None
    segments: dict[str, int] = field(default_factory=dict)  # workstream ledger files: kept/removed/rewritten
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


def restore_from_replica(settings: Settings) -> RestoreReport:
    """Restore ``settings.data_dir`` from the configured replicas (see module docstring).

    Raises:
        ConflictError: ``writer_alive`` or ``data_dir_not_empty``.
        BadRequestError: ``no_replica`` — neither ``git_remote`` nor ``s3_bucket`` configured.
        UnavailableError: ``restore_failed`` — git or litestream failed (their message).
    """
    r = settings.replication
    if not (r.git_remote or r.s3_bucket):
        raise BadRequestError("no replica configured: set replication.git_remote and/or replication.s3_bucket",
                              code="no_replica")
    lock = WriterLock(settings.data_dir).acquire()  # ConflictError writer_alive
    try:
        _check_empty(settings)
        shutil.rmtree(settings.search_dir, ignore_errors=True)  # an index of another DB: rebuilt by the writer
        report = RestoreReport()
        t0 = time.perf_counter()
        if r.git_remote:
            try:
                pygit2.clone_repository(r.git_remote, str(settings.wiki_dir), checkout_branch=r.git_branch,
                                        callbacks=RemoteCallbacks(r.git_remote))
            except (pygit2.GitError, ValueError, KeyError) as exc:
                raise UnavailableError(f"git clone of the wiki remote failed: {exc}", code="restore_failed") from exc
            report.wiki_cloned = True
        report.seconds["git_clone"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        if r.s3_bucket:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = write_litestream_config(settings, Path(tmp) / "litestream.yml")
                _run([litestream_binary(), "restore", "-config", str(cfg), "-if-replica-exists",
                      "-o", str(settings.db_path), str(settings.db_path)], "litestream restore",
                     env=litestream_env(child_environ()))
            report.db_restored = settings.db_path.exists()
        report.seconds["db_restore"] = round(time.perf_counter() - t1, 3)
    finally:
        lock.release()
    t2 = time.perf_counter()
    if not report.db_restored and report.wiki_cloned:
        rebuild(settings)  # no DB replica: index the wiki into a new DB (takes the lock itself)
    reconcile(settings, report)
    report.seconds["reconcile"] = round(time.perf_counter() - t2, 3)
    report.seconds["total"] = round(time.perf_counter() - t0, 3)
    return report


def _check_empty(settings: Settings) -> None:
    wiki_busy = settings.wiki_dir.exists() and any(settings.wiki_dir.iterdir())
    if settings.db_path.exists() or wiki_busy:
        raise ConflictError(
            f"{settings.data_dir} already holds a DB or a wiki; restore only into an empty data dir",
            code="data_dir_not_empty",
        )


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnavailableError(f"{what} failed: {exc}", code="restore_failed") from exc
    if proc.returncode != 0:
        raise UnavailableError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-500:]}", code="restore_failed")


def reconcile(settings: Settings, report: RestoreReport | None = None) -> RestoreReport:
    """Bring the DB and the wiki of ``settings.data_dir`` to one consistent point.

    Direct-disk; takes the writer lock. Returns ``report`` filled in (or a new one).

    Raises:
        ConflictError: ``writer_alive``.
    """
    report = report or RestoreReport()
    lock = WriterLock(settings.data_dir).acquire()
    conn = open_writer(settings.db_path)
    try:
        wiki = WikiRepo(settings.wiki_dir)
        applier = Applier(conn, wiki, settings, WriterMetrics.create(Telemetry("restore")))
        recorded = read_wiki_commit(conn)
        report.db_wiki_commit, report.wiki_head = recorded, wiki.head()
        report.scopes_created = _sync_scopes(conn, wiki)
        known = recorded is not None and _has_commit(wiki.repo, recorded)
        if known:
            wiki_newer = _changed_paths(wiki.repo, recorded, wiki.head())
        elif recorded is None:
            wiki_newer = set(_page_files(wiki.root))  # no record: the wiki decides everywhere
        else:
            wiki_newer = set()  # the DB is ahead of everything pushed
        if wiki_newer:
            index_hand_edits(applier, sorted(wiki_newer))
            report.reindexed = sorted(wiki_newer)
        report.written_back = _write_back(conn, wiki, skip=wiki_newer)
        if not known and recorded is not None:
            # Files only the wiki has (none expected when the DB is ahead, but hand edits exist)
            db_rels = _live_rels(conn)
            extra = sorted(set(_page_files(wiki.root)) - db_rels)
            if extra:
                index_hand_edits(applier, extra)
                report.reindexed += extra
        wiki.note_ops(Counter({"restore.reconcile": 1}))
        report.final_commit = applier.checkpoint("restore") or wiki.head()
        # Neither replica holds the workstream ledger's segment files: write them from the rows.
        report.segments = reconcile_segments(settings.data_dir, conn)
    finally:
        conn.close()
        lock.release()
    return report


def _has_commit(repo: pygit2.Repository, oid: str) -> bool:
    try:
        return isinstance(repo[oid], pygit2.Commit)
    except (KeyError, ValueError):
        return False


def _changed_paths(repo: pygit2.Repository, old: str, new: str | None) -> set[str]:
    if new is None or old == new:
        return set()
    diff = repo.diff(repo[old], repo[new])
    out = set()
    for patch in diff:
        for path in (patch.delta.old_file.path, patch.delta.new_file.path):
            rel = candidate_rel(Path(repo.workdir), str(Path(repo.workdir) / path))
            if rel:
                out.add(rel)
    return out


def _page_files(root: Path) -> list[str]:
    out = []
    for f in root.rglob("*.md"):
        rel = candidate_rel(root, str(f))
        if rel:
            out.append(rel)
    return out


def _live_rels(conn) -> set[str]:
    rows = conn.execute("SELECT workspace_id, project_id, path FROM pages WHERE is_latest = 1").fetchall()
    return {f"{r[0]}/{r[1]}/{r[2]}" for r in rows}


def _sync_scopes(conn, wiki: WikiRepo) -> int:
    """Create DB rows for scopes only the wiki has, and manifests for scopes only the DB has."""
    created = 0
    listing = scopes.list_workspaces(conn)
    ws_names = {w["workspace_id"]: w["workspace"] for w in listing}
    pj_names = {p["project_id"]: (w["workspace_id"], p["project"]) for w in listing for p in w["projects"]}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for ws_dir in sorted(p for p in wiki.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        meta = ws_dir / wikifmt.META_FILE
        if ws_dir.name not in ws_names and meta.is_file():
            name = wikifmt.parse_meta(meta.read_text(encoding="utf-8"))["name"]
            conn.execute("INSERT INTO workspaces(id, name, created_at) VALUES (?, ?, ?)", (ws_dir.name, name, now))
            ws_names[ws_dir.name] = name
            created += 1
        for pj_dir in sorted(p for p in ws_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            pmeta = pj_dir / wikifmt.META_FILE
            if pj_dir.name not in pj_names and pmeta.is_file() and ws_dir.name in ws_names:
                name = wikifmt.parse_meta(pmeta.read_text(encoding="utf-8"))["name"]
                conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES (?, ?, ?, ?)",
                             (pj_dir.name, ws_dir.name, name, now))
                pj_names[pj_dir.name] = (ws_dir.name, name)
                created += 1
    for wid, name in ws_names.items():
        rel = f"{wid}/{wikifmt.META_FILE}"
        if not (wiki.root / rel).is_file():
            atomic_write(wiki.root / rel, wikifmt.render_meta("workspace", id=wid, name=name))
            wiki.mark_dirty(rel)
    for pid, (wid, name) in pj_names.items():
        rel = f"{wid}/{pid}/{wikifmt.META_FILE}"
        if not (wiki.root / rel).is_file():
            atomic_write(wiki.root / rel, wikifmt.render_meta("project", id=pid, name=name, workspace_id=wid,
                                                              workspace=ws_names.get(wid, "")))
            wiki.mark_dirty(rel)
    return created


def _write_back(conn, wiki: WikiRepo, *, skip: set[str]) -> list[str]:
    """Write the DB's live pages into the wiki where the file is missing or differs."""
    out = []
    rows = conn.execute("SELECT workspace_id, project_id, path, body, frontmatter, content_hash, created_at,"
                        " updated_at FROM pages WHERE is_latest = 1").fetchall()
    for r in rows:
        rel = f"{r[0]}/{r[1]}/{r[2]}"
        if rel in skip:
            continue
        path = wiki.root / rel
        if path.is_file():
            try:
                parsed = wikifmt.parse(path.read_text(encoding="utf-8"))
                fm = {k: v for k, v in parsed.frontmatter.items() if k not in WRITER_KEYS}
                if wikifmt.content_hash(wikifmt.render(fm, parsed.body)) == r[5]:
                    continue
            except (OSError, UnicodeDecodeError, AimemError):
                pass  # unreadable or malformed: the DB's copy replaces it
        fm = {**json.loads(r[4] or "{}"), "created_at": r[6], "updated_at": r[7]}
        atomic_write(path, wikifmt.render(fm, r[3]))
        wiki.mark_dirty(rel)
        out.append(rel)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m aimem_writer.restore --data-dir DIR`` (what ``aimem restore --from-replica`` runs).

    Prints one summary line and returns 0; on a refusal (writer alive, data dir not empty,
    nothing configured) or a failed clone/restore prints ``aimem restore: <reason>`` on
    stderr and returns 1 (a failed restore's partial files are removed first).
    """
    import argparse
    import sys

    from aimem_common import config

    parser = argparse.ArgumentParser(prog="aimem restore --from-replica")
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        settings = config.load(args.data_dir, check_writable=True)
        report = restore_from_replica(settings)
    except AimemError as exc:
        if exc.code == "restore_failed":
            remove_partial(settings)
        print(f"aimem restore: {exc.message}", file=sys.stderr)
        return 1
    db = "from the bucket" if report.db_restored else "rebuilt from the wiki" if report.wiki_cloned else "empty"
    wiki = "cloned" if report.wiki_cloned else "written from the DB"
    print(f"restored {settings.data_dir} in {report.seconds.get('total', 0):.1f} s: db {db}, wiki {wiki}; "
          f"{len(report.reindexed)} pages reindexed from the wiki, {len(report.written_back)} written back "
          f"from the DB; wiki at {report.final_commit or '-'}")
    return 0


def remove_partial(settings: Settings) -> None:
    """Delete what a failed restore left (DB files and wiki) so it can be retried."""
    for p in settings.db_path.parent.glob(settings.db_path.name + "*"):
        p.unlink(missing_ok=True)
    shutil.rmtree(settings.wiki_dir, ignore_errors=True)
    shutil.rmtree(settings.search_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
