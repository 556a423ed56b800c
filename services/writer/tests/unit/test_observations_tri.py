"""``observations_tri`` (schema migration 13) stays exactly the unspaced-script observations
through the writer's ops: append, sweep prune, session and project purge, session and
project moves (true move and merge), and compaction. Real migrated SQLite + real git wiki.

"Exactly" is checked three ways (``assert_exact``): the indexed rowids equal the rows an
independent oracle picks (SQL ``GLOB trigram.UNSPACED_GLOB``, not the writer's regex); FTS5's
'integrity-check' passes; and the index's totals record and every (term, doc, column,
offset) instance equal those of a fresh table built from those rows. The last check is what
catches a 'delete' of a never-indexed row: a contentless table's integrity-check does not.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest

from aimem_common.db.trigram import TRI_PAD, UNSPACED_GLOB
from aimem_common.models import Scope
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query

ZH = "我们决定使用读写分离的缓存策略来降低数据库压力。"
JA = "本番環境へのデプロイはブルーグリーン方式で行います。"


_spec = importlib.util.spec_from_file_location("aimem_test_admin_ops", Path(__file__).with_name("test_admin_ops.py"))
_admin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_admin)


class Harness(_admin.Harness):
    """``test_admin_ops``' op harness (each ``run`` one command in its own transaction, then the
    wiki flush and a git checkpoint), scoped to ``default/app`` unless told otherwise."""

    def run(self, op: str, payload: dict, workspace: str | None = "default", project: str | None = "app") -> dict:
        return super().run(op, payload, workspace, project)

    def append(self, sid: str, body: str, title: str = "", project: str = "app", workspace: str = "default") -> int:
        return self.run("observation.append", {"session_id": sid, "kind": "user-prompt", "agent": "claude-code",
                                               "title": title, "body": body, "sanitized": True},
                        workspace, project)["observation_id"]

    def scope(self, ws: str, pj: str) -> Scope:
        r = self.conn.execute("SELECT w.id, p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                              " WHERE w.name = ? AND p.name = ?", (ws, pj)).fetchone()
        return Scope(workspace=ws, project=pj, workspace_id=r[0], project_id=r[1])

    def raw(self, q: str, ws: str = "default", pj: str = "app") -> list[tuple[str, str, int]]:
        """``raw_hits`` of a search of ``ws/pj`` as ``(project, session, observation id)``."""
        res = memory_query(self.conn, q, [self.scope(ws, pj)], options=QueryOptions()).to_json()
        return [(x["project"], x["session_id"], x["observation_id"]) for x in res["raw_hits"]]


@pytest.fixture
def h(tmp_path: Path):
    harness = Harness(tmp_path)
    yield harness
    harness.conn.close()


def indexed(conn: sqlite3.Connection) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM observations_tri_docsize")}


def _totals(block: bytes | None) -> list[int]:
    """FTS5's averages record (``_data`` id 1): varints of the row count, then each column's
    token count; never written (an empty table) reads as zeros."""
    out, n = [], 0
    for b in block or b"":
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            out.append(n)
            n = 0
    return out or [0, 0, 0]


def _fingerprint(conn: sqlite3.Connection, table: str = "observations_tri") -> tuple:
    return (_totals(conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()[0]),
            sorted(tuple(r) for r in conn.execute(f"SELECT term, doc, col, offset FROM {table}_inst")))


def assert_exact(conn: sqlite3.Connection) -> None:
    """``observations_tri`` holds exactly the unspaced-script observations, as a fresh build would."""
    rows = conn.execute("SELECT id, title, body FROM observations WHERE title || ' ' || body GLOB ?",
                        (UNSPACED_GLOB,)).fetchall()
    assert indexed(conn) == {r[0] for r in rows}
    conn.execute("INSERT INTO observations_tri(observations_tri, rank) VALUES ('integrity-check', 0)")
    fresh = sqlite3.connect(":memory:")
    fresh.execute("CREATE VIRTUAL TABLE observations_tri USING fts5(title, body, content='', tokenize='trigram')")
    fresh.execute("CREATE VIRTUAL TABLE observations_tri_inst USING fts5vocab(observations_tri, 'instance')")
    fresh.execute("BEGIN")
    fresh.executemany("INSERT INTO observations_tri(rowid, title, body) VALUES (?, ?, ?)",
                      [(i, t + TRI_PAD, b + TRI_PAD) for i, t, b in rows])
    fresh.execute("COMMIT")
    assert _fingerprint(conn) == _fingerprint(fresh)
    fresh.close()


def test_append_indexes_only_unspaced_script_observations(h: Harness) -> None:
    zh = h.append("s1", ZH)
    ja = h.append("s1", "deployed", title="デプロイ")  # the title alone qualifies
    h.append("s1", "ran the tests — 12 passed ✓ → done")  # non-ASCII, no unspaced script
    h.append("s1", "plain english prompt")
    assert indexed(h.conn) == {zh, ja}
    assert_exact(h.conn)
    assert h.raw("缓存") == [("app", "s1", zh)] and h.raw("デプロイ") == [("app", "s1", ja)]


def test_prune_and_purges_keep_it_exact(h: Harness) -> None:
    """Sweep prune (English and CJK rows of an ended session), session purge and project
    purge (with collateral rows of the same session id in another project)."""
    for i in range(3):
        h.append("done", f"english prompt {i} — ✓")
        h.append("done", f"日志轮转每天执行一次，第{i}次。")
    h.run("session.end", {"session_id": "done", "agent": "claude-code"})
    assert h.raw("日志") == []  # the session's page holds it now: a hit, so no raw fallback
    pruned = h.run("sweep.apply", {"prune_observations_before": "2999-01-01T00:00:00Z", "prune_session_ids": ["done"],
                                   "prune_batch": 3})
    assert pruned["observations_pruned"] == 3
    assert_exact(h.conn)
    a = h.append("s2", ZH)
    h.append("s2", "english only")
    b = h.append("s3", JA)
    coll = h.append("s3", f"collateral {ZH}", project="other")  # s3 has no sessions row in "other"
    h.conn.execute("DELETE FROM sessions WHERE session_id = 's3' AND project_id = ?",
                   (h.scope("default", "other").project_id,))
    assert h.raw("缓存") == [("app", "s2", a)]
    h.run("session.purge", {"session_id": "s2"})
    assert_exact(h.conn)
    assert h.raw("缓存") == [] and h.raw("デプロイ") == [("app", "s3", b)]
    assert coll in indexed(h.conn)
    h.run("project.purge", {"force": True})
    assert_exact(h.conn)
    assert coll not in indexed(h.conn) and indexed(h.conn) == set()


def test_moves_keep_it_exact_and_search_follows_the_project(h: Harness) -> None:
    """A session move and a project move re-stamp ``project_id`` only: the index needs no
    change and a search of the new project finds the moved rows; a merge deletes the source's."""
    a = h.append("s1", ZH)
    h.append("s1", "english prompt")
    b = h.append("s2", JA, project="tmp")
    h.run("session.move", {"session_id": "s2", "to_project": "app", "dry_run": False, "force": True},
          "default", "tmp")
    assert_exact(h.conn)
    assert h.raw("デプロイ") == [("app", "s2", b)] and h.raw("デプロイ", "default", "tmp") == []
    h.run("project.move", {"to_workspace": "lab", "force": True})  # true move
    assert_exact(h.conn)
    assert h.raw("缓存", "lab", "app") == [("app", "s1", a)]
    c = h.append("s9", f"另一个{ZH}", workspace="default", project="app")  # a new project in default
    out = h.run("project.move", {"to_workspace": "lab", "on_conflict": "duplicate", "force": True})
    assert out["moved_via"] == "copy-purge"  # a merge copies pages and purges the source's observations
    assert out["source_purge"]["observations_deleted"] == 1
    assert_exact(h.conn)
    assert c not in indexed(h.conn) and h.raw("缓存", "lab", "app") == [("app", "s1", a)]


def test_compaction_rebuilds_it_exactly(h: Harness) -> None:
    ids = [h.append("s1", ZH), h.append("s1", "english"), h.append("s1", "猫", title="ペット")]
    h.conn.execute("DELETE FROM observations WHERE id = ?", (ids[0],))
    h.append("s2", JA, project="other")
    h.run("project.purge", {"force": True, "compact": True}, "default", "other")
    assert_exact(h.conn)
    assert indexed(h.conn) == {ids[2]}
    assert h.raw("猫") == [("app", "s1", ids[2])]
