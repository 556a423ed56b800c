"""Schema migrations: fresh DB, idempotent re-run, readers wait for the writer's version."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from aimem_common.db.connect import migrate, open_reader, open_writer
from aimem_common.db.schema import SCHEMA_VERSION
from aimem_common.db.trigram import UNSPACED_GLOB
from aimem_common.errors import UnavailableError

EXPECTED_TABLES = {
    "workspaces", "projects", "pages", "pages_fts", "links", "entities", "entity_page_links",
    "sessions", "observations", "observations_fts", "handoffs", "agent_messages", "page_feedback",
    "page_access", "page_evidence", "page_embeddings", "session_consolidation_jobs",
    "auto_improve_proposals", "auto_improve_runs", "auto_improve_state", "audit_log",
    "ingest_keys", "users", "api_keys", "grants", "meta",
}


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_fresh_db_gets_full_schema(tmp_path: Path) -> None:
    conn = open_writer(tmp_path / "db" / "m.sqlite")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert EXPECTED_TABLES <= tables(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_rerun_is_noop(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    conn = open_writer(path)
    conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
    before = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    assert migrate(conn) == SCHEMA_VERSION
    conn.close()
    conn = open_writer(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == before
    assert conn.execute("SELECT value FROM meta WHERE key='k'").fetchone()[0] == "v"


def test_reader_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    open_writer(path).close()
    reader = open_reader(path, wait_s=1)
    with pytest.raises(sqlite3.OperationalError):
        reader.execute("INSERT INTO meta(key, value) VALUES ('a', 'b')")


def test_reader_waits_for_writer_version(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    # An older, unmigrated file exists first (version 0).
    sqlite3.connect(path).close()

    def later() -> None:
        time.sleep(0.4)
        open_writer(path).close()

    t = threading.Thread(target=later)
    t.start()
    t0 = time.monotonic()
    reader = open_reader(path, wait_s=10, poll_s=0.05)
    waited = time.monotonic() - t0
    t.join()
    assert waited >= 0.3
    assert reader.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_reader_gives_up_with_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="not ready"):
        open_reader(tmp_path / "missing.sqlite", wait_s=0.2)


def test_fts_indexes_latest_versions_only(tmp_path: Path) -> None:
    conn = open_writer(tmp_path / "m.sqlite")
    conn.execute("INSERT INTO workspaces VALUES ('w', 'default', 'now')")
    conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES ('p', 'w', 'proj', 'now')")
    ins = ("INSERT INTO pages(workspace_id, project_id, path, title, body, kind, tier, content_hash,"
           " created_at, updated_at, is_latest) VALUES ('w','p','a.md',?,?, 'note','episodic','h','t','t',?)")
    conn.execute(ins, ("Old", "zebra stripes", 1))
    conn.execute("UPDATE pages SET is_latest = 0 WHERE id = 1")
    conn.execute(ins, ("New", "lion mane", 1))
    hits = lambda q: [r[0] for r in conn.execute("SELECT rowid FROM pages_fts WHERE pages_fts MATCH ?", (q,))]
    assert hits("zebra") == []
    assert hits("lion") == [2]


def test_a_projects_counts_search_an_index(tmp_path: Path) -> None:
    """``read.status.counts`` of one project (the brief, status): no table scan, which grew with
    every project's links and read every vector blob once embeddings were on."""
    from aimem_common.models import Scope
    from aimem_common.read import status

    conn = open_writer(tmp_path / "m.sqlite")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)  # each statement with its values bound
    status.counts(conn, Scope("default", "app", "w", "p"))
    conn.set_trace_callback(None)
    counts = [s for s in statements if s.startswith("SELECT count(*)")]
    assert len(counts) >= 10
    plans = {s: [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + s)] for s in counts}
    assert {s: p for s, p in plans.items() if any(x.startswith("SCAN") for x in p)} == {}


def database_at(path: Path, last: int) -> sqlite3.Connection:
    """A database as a release whose newest migration was ``last`` left it (autocommit)."""
    from aimem_common.db.schema import MIGRATIONS

    conn = sqlite3.connect(path, isolation_level=None)
    for version, sql in MIGRATIONS:
        if version > last:
            break
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version = {version}")
    return conn


def test_a_database_of_an_earlier_release_is_moved_forward(tmp_path: Path) -> None:
    """A DB last migrated to 6 (the release before dead letters) gains every later table."""
    path = tmp_path / "m.sqlite"
    conn = database_at(path, 6)
    assert "dead_letters" not in tables(conn)
    conn.close()
    conn = open_writer(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert "dead_letters" in tables(conn)


def test_observations_fts_gains_project_id_and_keeps_rows(tmp_path: Path) -> None:
    """Migration 8: observations captured before it are indexed again with their project, and
    the triggers keep the project column in step."""
    path = tmp_path / "m.sqlite"
    conn = database_at(path, 7)
    conn.execute("INSERT INTO workspaces VALUES ('w', 'default', 'now')")
    conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES ('pa', 'w', 'a', 'now'), ('pb', 'w', 'b', 'now')")
    obs = "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, body, occurred_at, created_at)" \
          " VALUES ('w', ?, 's', 'user-prompt', 'x', ?, 'now', 'now')"
    conn.execute(obs, ("pa", "the ledger partitions"))
    conn.close()
    conn = open_writer(path)
    conn.execute(obs, ("pb", "ledger again"))
    hits = lambda q: sorted(r[0] for r in conn.execute("SELECT rowid FROM observations_fts WHERE observations_fts MATCH ?", (q,)))
    assert hits("ledger") == [1, 2]
    assert hits('project_id : "pa" AND ledger') == [1] and hits('project_id : "pb" AND ledger') == [2]
    conn.execute("UPDATE observations SET project_id = 'pb' WHERE id = 1")
    assert hits('project_id : "pb" AND ledger') == [1, 2]
    conn.execute("DELETE FROM observations WHERE id = 2")
    assert hits("ledger") == [1]


def test_pages_tri_is_padded_and_keeps_rows_and_versions(tmp_path: Path) -> None:
    """Migration 12: pages indexed before it are indexed again padded (a word in a column's
    last characters has a trigram starting with it), and the triggers send the padded values
    on edit, retire and delete (no stale trigram is left)."""
    path = tmp_path / "m.sqlite"
    conn = database_at(path, 11)
    conn.execute("INSERT INTO workspaces VALUES ('w', 'default', 'now')")
    conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES ('pa', 'w', 'a', 'now')")
    page = ("INSERT INTO pages(workspace_id, project_id, path, title, body, kind, tier, content_hash, created_at,"
            " updated_at) VALUES ('w', 'pa', ?, ?, ?, 'note', 'semantic', 'h', 'now', 'now')")
    conn.execute(page, ("a.md", "标题", "これは猫"))
    conn.execute(page, ("b.md", "english", "only ascii"))
    conn.close()
    conn = open_writer(path)

    def docs(prefix: str) -> list[int]:
        return sorted({r[0] for r in conn.execute("SELECT doc FROM pages_tri_inst WHERE term >= ? AND term < ?",
                                                  (prefix, prefix + "\U0010ffff"))})

    assert docs("猫") == [1] and docs("标题") == [1]
    conn.execute(page, ("c.md", "猫", "数据"))
    assert docs("猫") == [1, 3] and docs("数据") == [3]
    conn.execute("UPDATE pages SET body = '没有了' WHERE id = 1")
    assert docs("猫") == [3] and docs("没有了") == [1]
    conn.execute("UPDATE pages SET is_latest = 0 WHERE id = 3")
    assert docs("猫") == [] and docs("数据") == []
    conn.execute("DELETE FROM pages WHERE id = 1")
    assert conn.execute("SELECT count(*) FROM pages_tri_inst").fetchone()[0] == 0
    conn.execute("INSERT INTO pages_tri(pages_tri, rank) VALUES ('integrity-check', 0)")


def test_observations_tri_indexes_the_unspaced_observations_of_a_version_12_db(tmp_path: Path) -> None:
    """Migration 13: observations captured before it that hold an unspaced script (title or
    body) are indexed padded; ASCII and other non-ASCII text (an em-dash, ✓) are not. The
    triggers remove an indexed row on delete and re-decide on an edit; deleting an unindexed
    row sends no 'delete' (the totals record would drop below the rows held)."""
    from aimem_common.db.trigram import index_observation_tri, unspaced

    path = tmp_path / "m.sqlite"
    conn = database_at(path, 12)
    conn.execute("INSERT INTO workspaces VALUES ('w', 'default', 'now')")
    conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES ('pa', 'w', 'a', 'now')")
    obs = ("INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body, occurred_at,"
           " created_at) VALUES ('w', 'pa', 's', 'user-prompt', 'x', ?, ?, 'now', 'now')")
    for title, body in [("", "我们使用缓存"), ("デプロイ", "done"), ("Bash", "ok — 3 passed ✓"), ("", "plain"),
                        ("", "เราใช้แคช"), ("", "데이터베이스를 연결")]:
        conn.execute(obs, (title, body))
    conn.close()
    conn = open_writer(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION

    def held() -> list[int]:
        return [r[0] for r in conn.execute("SELECT id FROM observations_tri_docsize ORDER BY id")]

    def docs(prefix: str) -> list[int]:
        return sorted({r[0] for r in conn.execute("SELECT doc FROM observations_tri_inst WHERE term >= ? AND term < ?",
                                                  (prefix, prefix + "\U0010ffff"))})

    def rows_held() -> int:  # FTS5's row count (averages record), what bm25 and the short-word idf use
        block = conn.execute("SELECT block FROM observations_tri_data WHERE id = 1").fetchone()[0]
        return block[0] if block else 0  # < 128 rows: a one-byte varint

    assert held() == [1, 2, 5, 6] and rows_held() == 4
    assert docs("缓存") == [1] and docs("デプ") == [2] and docs("连") == [] and docs("연결") == [6]
    assert docs("存") == [1]  # the last character of a body: padded, so a trigram starts with it
    conn.execute("DELETE FROM observations WHERE id IN (3, 4)")  # not indexed: no 'delete' sent
    assert held() == [1, 2, 5, 6] and rows_held() == 4
    conn.execute("UPDATE observations SET body = '没有了' WHERE id = 1")
    conn.execute("UPDATE observations SET title = 'deploy' WHERE id = 2")  # no unspaced text left
    assert docs("缓存") == [] and docs("没有") == [1] and docs("デプ") == [] and held() == [1, 5, 6]
    conn.execute("DELETE FROM observations WHERE id IN (1, 5, 6)")
    assert held() == [] and rows_held() == 0
    assert conn.execute("SELECT count(*) FROM observations_tri_inst").fetchone()[0] == 0
    conn.execute("INSERT INTO observations_tri(observations_tri, rank) VALUES ('integrity-check', 0)")
    # the writer's Python test and the schema's GLOB agree, character class by character class
    for text in ["a", "—", "✓", "ｱ", "猫", "ー", "ㄱ", "ก", "ລ", "က", "ក", "ᄀ", "豈", "\u3400", "\ua960"]:
        glob = conn.execute("SELECT ? GLOB ?", (text, UNSPACED_GLOB)).fetchone()[0]
        assert unspaced(text) == bool(glob), text
    oid = conn.execute(obs, ("", "猫")).lastrowid
    assert index_observation_tri(conn, oid, "", "猫") and docs("猫") == [oid]
    assert not index_observation_tri(conn, oid + 1, "Bash", "ok — ✓")
