"""Restore reconciliation: a DB copy and a wiki clone taken at different moments become one.

The DB names the wiki commit it had caught up with (``meta.wiki_commit``). When the clone is
newer, the pages changed since that commit are reindexed from the wiki; when the DB is newer
(its commit was never pushed), its pages are written back into the wiki. Real SQLite, a real
bare git remote, the writer's real batch path (``WriterHarness``).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pygit2
import pytest

from aimem_common import config
from aimem_common.errors import ConflictError

from aimem_writer.batch import read_wiki_commit
from aimem_writer.lock import WriterLock
from aimem_writer.replicate import push_commit
from aimem_writer.restore import reconcile, restore_from_replica


def _snapshot(conn: sqlite3.Connection, dest: Path) -> None:
    """What Litestream would restore: a consistent copy of the DB at this moment."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = sqlite3.connect(dest)
    conn.backup(out)
    out.close()


def _live(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT path, body FROM pages WHERE is_latest = 1").fetchall())
    finally:
        conn.close()


@pytest.fixture
def remote(tmp_path):
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=main", str(path)], check=True)
    return path


def _new_node(tmp_path: Path, remote: Path, snapshot: Path) -> config.Settings:
    settings = config.load(tmp_path / "new", environ={})
    pygit2.clone_repository(str(remote), str(settings.wiki_dir), checkout_branch="main")
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    settings.db_path.write_bytes(snapshot.read_bytes())
    return settings


def test_wiki_newer_than_the_db_is_reindexed(wh, tmp_path, remote):
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\nfirst text of a\n"})
    wh.ok("page.write", {"path": "concepts/b.md", "body": "# B\n\nb will be deleted\n"})
    c1 = wh.applier.checkpoint()
    assert read_wiki_commit(wh.conn) == c1
    _snapshot(wh.conn, tmp_path / "snap.sqlite")  # the DB replica stops here
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\nsecond text of a\n"})
    wh.ok("page.delete", {"path": "concepts/b.md"})
    wh.ok("page.write", {"path": "concepts/c.md", "body": "# C\n\nonly in the wiki\n"})
    c2 = wh.applier.checkpoint()
    push_commit(wh.wiki.root, str(remote), c2, "main")  # the wiki replica is newer

    settings = _new_node(tmp_path, remote, tmp_path / "snap.sqlite")
    report = reconcile(settings)
    live = _live(settings.db_path)
    assert report.db_wiki_commit == c1 and report.wiki_head == c2
    assert set(live) == {"concepts/a.md", "concepts/c.md"}
    assert "second text" in live["concepts/a.md"] and "only in the wiki" in live["concepts/c.md"]
    assert len(report.reindexed) == 3 and report.written_back == []
    conn = sqlite3.connect(settings.db_path)
    assert read_wiki_commit(conn) == report.final_commit == c2  # nothing to commit: the wiki was right
    conn.close()


def test_db_newer_than_the_last_push_is_written_back(wh, tmp_path, remote):
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\npushed text\n"})
    c1 = wh.applier.checkpoint()
    push_commit(wh.wiki.root, str(remote), c1, "main")
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\nnewer text, never pushed\n"})
    wh.ok("page.write", {"path": "decisions/d.md", "body": "# D\n\na decision only the DB has\n"})
    c2 = wh.applier.checkpoint()  # the remote is down: c2 stays local
    _snapshot(wh.conn, tmp_path / "snap.sqlite")

    settings = _new_node(tmp_path, remote, tmp_path / "snap.sqlite")
    report = reconcile(settings)
    assert report.db_wiki_commit == c2 and report.wiki_head == c1
    assert sorted(p.rsplit("/", 1)[-1] for p in report.written_back) == ["a.md", "d.md"]
    repo = pygit2.Repository(str(settings.wiki_dir))
    assert repo.descendant_of(repo.head.target, pygit2.Oid(hex=c1))  # history kept, one commit on top
    files = {p.name: p.read_text() for p in settings.wiki_dir.rglob("*.md") if p.parent.name in ("concepts", "decisions")}
    assert "newer text, never pushed" in files["a.md"] and "only the DB has" in files["d.md"]
    head_tree = repo.head.peel(pygit2.Tree)
    for rel in report.written_back:  # committed, not just on disk
        assert repo[head_tree[rel].id].data.decode() == (settings.wiki_dir / rel).read_text()
    live = _live(settings.db_path)
    assert "newer text" in live["concepts/a.md"]


def test_restore_refuses_a_running_writer_and_a_non_empty_data_dir(tmp_path, remote):
    env = {"AIMEM_REPLICATION__GIT_REMOTE": str(remote)}
    settings = config.load(tmp_path / "node", environ=env)
    lock = WriterLock(settings.data_dir).acquire()
    try:
        with pytest.raises(ConflictError) as exc:
            restore_from_replica(settings)
        assert exc.value.code == "writer_alive"
    finally:
        lock.release()
    settings.wiki_dir.mkdir(parents=True)
    (settings.wiki_dir / "stray.md").write_text("x")
    with pytest.raises(ConflictError) as exc:
        restore_from_replica(settings)
    assert exc.value.code == "data_dir_not_empty"
    assert (settings.wiki_dir / "stray.md").read_text() == "x"  # nothing touched


def test_a_replica_restore_writes_the_ledger_segments_from_the_rows(wh, tmp_path, remote):
    """Neither the git remote nor the DB replica holds ``raw/workstreams``: the rows do."""
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\npushed text\n"})
    wh.ok("workstream.lease", {"action": "open", "run_id": "a" * 32, "harness": "codex", "cwd": "/w/repo"},
          root="/w/repo")
    got = wh.ok("workstream.append", {"run_id": "a" * 32, "events": [
        {"role": "user", "text": "the quoll migration"}, {"role": "assistant", "text": "planned"}]})
    c1 = wh.applier.checkpoint()
    push_commit(wh.wiki.root, str(remote), c1, "main")
    _snapshot(wh.conn, tmp_path / "snap.sqlite")

    settings = _new_node(tmp_path, remote, tmp_path / "snap.sqlite")
    report = reconcile(settings)
    assert report.segments == {"kept": 0, "removed": 0, "rewritten": 1}
    assert (settings.data_dir / got["segment"]).read_text() == (wh.settings.data_dir / got["segment"]).read_text()
