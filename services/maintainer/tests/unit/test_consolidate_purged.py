"""A consolidation job leased before its session was purged reads nothing of it (real SQLite)."""

from __future__ import annotations

from aimem_common import config
from aimem_common.db.connect import open_writer
from aimem_common.models import Scope

from aimem_maintainer.consolidate import gather


def test_gather_reads_nothing_of_a_purged_session(tmp_path) -> None:
    settings = config.load(tmp_path / "data", environ={})
    conn = open_writer(settings.db_path)
    try:
        conn.execute("INSERT INTO workspaces(id, name, created_at) VALUES ('w', 'default', 't')")
        conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES ('p', 'w', 'app', 't')")
        conn.execute("INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body,"
                     " occurred_at, created_at) VALUES ('w', 'p', 's1', 'user-prompt', 'x', 'Prompt',"
                     " 'rotate the zanzibar key', 't', 't')")
        conn.commit()
        scope = Scope("default", "app", "w", "p")
        before = gather(conn, scope, "s1", budget_chars=10_000, related_k=0)
        assert "zanzibar" in str(before["observations"])  # what a job would send: the control
        conn.execute("INSERT INTO purge_tombstones(kind, workspace_id, project_id, session_id, workspace, project,"
                     " purged_at, actor) VALUES ('session', 'w', 'p', 's1', 'default', 'app', 't', 'tester')")
        conn.commit()
        after = gather(conn, scope, "s1", budget_chars=10_000, related_k=0)
        assert after["session_page"] is None and after["observations"] == [] and after["purged"] is True
        assert "zanzibar" not in str(after)
    finally:
        conn.close()
