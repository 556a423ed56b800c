"""Admin op handlers against a real migrated SQLite + a real git wiki (no NATS).

Each ``run`` is one command in its own transaction, followed by the wiki flush and a git
checkpoint, as the writer's batch loop does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from aimem_common import config
from aimem_common.db.connect import open_writer
from aimem_common.errors import AimemError
from aimem_common.commands import make_envelope, parse_payload
import aimem_writer.ops  # noqa: F401  (registers every handler)
from aimem_writer import registry
from aimem_writer.page_store import PageInput
from aimem_writer.tx import ScopeCache, Tx, utc_now
from aimem_writer.wiki import WikiRepo, WikiStage


class Harness:
    def __init__(self, tmp: Path):
        self.settings = config.load(tmp / "data", environ={})
        self.conn = open_writer(self.settings.db_path)
        self.repo = WikiRepo(self.settings.wiki_dir)

    def _tx(self, env) -> Tx:
        return Tx(self.conn, env, now=utc_now(), settings=self.settings, wiki=WikiStage(self.repo.root),
                  scopes=ScopeCache())

    def _apply(self, env, fn):
        tx = self._tx(env)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            res = fn(tx)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.repo.flush(tx.wiki.coalesced())
        self.repo.checkpoint()
        return res

    def run(self, op: str, payload: dict, workspace: str | None = None, project: str | None = None) -> dict:
        env = make_envelope(op, payload, workspace=workspace, project=project, actor="tester")
        cmd = parse_payload(op, env.payload)
        return self._apply(env, lambda tx: registry.get(op).fn(tx, env, cmd))

    def write(self, ws: str, pj: str, path: str, body: str, session_id: str | None = None) -> dict:
        env = make_envelope("project.rename", {"to": "x"}, workspace=ws, project=pj)
        return self._apply(env, lambda tx: tx.pages.write(tx.scope(create=True), PageInput(path=path, body=body),
                                                           session_id=session_id))

    def session(self, ws: str, pj: str, sid: str, n_obs: int = 3, ended: bool = True, cwd: str = "/w/app") -> None:
        env = make_envelope("project.rename", {"to": "x"}, workspace=ws, project=pj)

        def fn(tx: Tx) -> None:
            s = tx.scope(create=True)
            now = tx.now
            tx.conn.execute(
                "INSERT INTO sessions(workspace_id, project_id, session_id, agent, cwd, started_at, last_event_at,"
                " ended_at, observation_count) VALUES (?, ?, ?, 'claude-code', ?, ?, ?, ?, ?)",
                (s.workspace_id, s.project_id, sid, cwd, now, now, now if ended else None, n_obs))
            for i in range(n_obs):
                tx.conn.execute(
                    "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body,"
                    " occurred_at, created_at) VALUES (?, ?, ?, 'user-prompt', 'claude-code', ?, ?, ?, ?)",
                    (s.workspace_id, s.project_id, sid, f"prompt {i}", f"zebracorn prompt {i} of {sid}", now, now))
            tx.conn.execute(
                "INSERT INTO handoffs(workspace_id, project_id, automatic, from_session_id, title, body, created_at)"
                " VALUES (?, ?, 1, ?, 'next', 'continue', ?)", (s.workspace_id, s.project_id, sid, now))

        self._apply(env, fn)

    def count(self, sql: str, *args) -> int:
        return self.conn.execute(sql, args).fetchone()[0]

    def scope_ids(self, ws: str, pj: str) -> tuple[str, str]:
        r = self.conn.execute("SELECT w.id, p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                              " WHERE w.name = ? AND p.name = ?", (ws, pj)).fetchone()
        return r[0], r[1]


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = Harness(tmp_path)
    yield harness
    harness.conn.close()


def populate(h: Harness) -> None:
    h.write("default", "app", "decisions/0001.md", "# Use NATS\nWe chose JetStream. See [[gotchas/ack.md]].")
    h.write("default", "app", "gotchas/ack.md", "# Ack after commit\nAck only after the SQLite commit.")
    h.write("default", "app", "decisions/0001.md", "# Use NATS\nWe chose JetStream for durability.")
    h.session("default", "app", "s-1", n_obs=4)
    h.write("default", "app", "sessions/s-1.md", "# Session s-1\nzebracorn summary", session_id="s-1")
    h.write("default", "other", "decisions/0001.md", "# Other project\nSame path, other project.")


def test_purge_project_preview_equals_confirmed_and_audits(h: Harness) -> None:
    populate(h)
    wid, pid = h.scope_ids("default", "app")
    preview = h.run("project.purge", {"dry_run": True}, "default", "app")
    assert preview["dry_run"] is True and preview["pages_deleted"] == 3 and preview["sessions_deleted"] == 1
    assert h.count("SELECT count(*) FROM pages WHERE project_id = ?", pid) == 4  # nothing deleted
    assert h.count("SELECT count(*) FROM audit_log WHERE op = 'project.purge'") == 0
    done = h.run("project.purge", {}, "default", "app")
    keys = [k for k in preview if k.endswith(("_deleted", "_denulled")) and k != "files_deleted"]
    assert {k: done[k] for k in keys} == {k: preview[k] for k in keys}
    assert h.count("SELECT count(*) FROM pages WHERE project_id = ?", pid) == 0
    assert h.count("SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'zebracorn'") == 0
    assert h.count("SELECT count(*) FROM observations_fts WHERE observations_fts MATCH 'zebracorn'") == 0
    assert not (h.settings.wiki_dir / wid / pid).exists()
    # the sibling project with the same path is untouched
    assert (h.settings.wiki_dir / h.scope_ids("default", "other")[0] / h.scope_ids("default", "other")[1]
            / "decisions/0001.md").is_file()
    row = h.conn.execute("SELECT * FROM audit_log WHERE op = 'project.purge'").fetchone()
    assert row["actor"] == "tester" and json.loads(row["detail"])["pages_deleted"] == 3
    with pytest.raises(AimemError) as e:
        h.run("project.purge", {}, "default", "app")
    assert e.value.status == 404


def test_purge_project_live_session_guard(h: Harness) -> None:
    h.session("default", "app", "live", ended=False)
    with pytest.raises(AimemError) as e:
        h.run("project.purge", {"dry_run": True}, "default", "app")
    assert e.value.status == 409 and e.value.code == "live_session"
    assert h.run("project.purge", {"force": True, "compact": True}, "default", "app")["sessions_deleted"] == 1


def test_purge_session_scoped_preview_and_collateral(h: Harness) -> None:
    populate(h)
    # a stray observation of s-1 stamped into another project, which has no s-1 session row
    wid2, pid2 = h.scope_ids("default", "other")
    h.conn.execute(
        "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, occurred_at, created_at)"
        " VALUES (?, ?, 's-1', 'other', 'x', 'now', 'now')", (wid2, pid2))
    with pytest.raises(AimemError) as e:
        h.run("session.purge", {"session_id": "s-1", "dry_run": True}, "default", "other")
    assert e.value.status == 404
    preview = h.run("session.purge", {"session_id": "s-1", "dry_run": True}, "default", "app")
    assert preview["observations_deleted"] == 4 and preview["collateral_observations_deleted"] == 1
    assert preview["removed_paths"] == ["sessions/s-1.md"] and preview["files_deleted"] == []
    done = h.run("session.purge", {"session_id": "s-1"}, "default", "app")
    for k in ("observations_deleted", "collateral_observations_deleted", "handoffs_deleted", "pages_deleted",
              "page_versions_deleted"):
        assert done[k] == preview[k], k
    assert h.count("SELECT count(*) FROM observations WHERE session_id = 's-1'") == 0
    assert h.count("SELECT count(*) FROM pages WHERE path = 'sessions/s-1.md'") == 0
    wid, pid = h.scope_ids("default", "app")
    assert not (h.settings.wiki_dir / wid / pid / "sessions/s-1.md").exists()
    assert h.count("SELECT count(*) FROM audit_log WHERE op = 'session.purge'") == 1


def test_rename_project_and_workspace_failure_codes(h: Harness) -> None:
    populate(h)
    wid, pid = h.scope_ids("default", "app")
    out = h.run("project.rename", {"to": "app2"}, "default", "app")
    assert out["to"] == "app2" and out["pages"] == 3
    assert h.scope_ids("default", "app2") == (wid, pid)
    assert "name: app2" in (h.settings.wiki_dir / wid / pid / "_meta.md").read_text()
    for to, status in (("other", 422), ("bad/name", 422), ("", 422)):
        with pytest.raises(AimemError) as e:
            h.run("project.rename", {"to": to}, "default", "app2")
        assert e.value.status == status, to
    with pytest.raises(AimemError) as e:
        h.run("project.rename", {"to": "z"}, "default", "missing")
    assert e.value.status == 404
    h.run("workspace.rename", {"workspace": "default", "to": "home"})
    assert h.scope_ids("home", "app2") == (wid, pid)
    with pytest.raises(AimemError) as e:
        h.run("workspace.rename", {"workspace": "nope", "to": "x"})
    assert e.value.status == 404
    assert h.count("SELECT count(*) FROM audit_log WHERE op IN ('project.rename', 'workspace.rename')") == 2


def test_move_project_true_move_keeps_everything(h: Harness) -> None:
    populate(h)
    wid, pid = h.scope_ids("default", "app")
    with pytest.raises(AimemError) as e:
        h.run("project.move", {"to_workspace": "default"}, "default", "app")
    assert e.value.status == 422
    preview = h.run("project.move", {"to_workspace": "lab", "dry_run": True}, "default", "app")
    assert preview["moved_via"] == "true-move" and preview["dry_run"] and preview["would_create_workspace"]
    out = h.run("project.move", {"to_workspace": "lab"}, "default", "app")
    assert out["moved_via"] == "true-move"
    new_wid, new_pid = h.scope_ids("lab", "app")
    assert new_pid == pid and new_wid != wid
    for table in ("pages", "sessions", "observations", "handoffs", "links"):
        assert h.count(f"SELECT count(*) FROM {table} WHERE project_id = ? AND workspace_id != ?", pid, new_wid) == 0
    assert h.count("SELECT count(*) FROM pages WHERE project_id = ?", pid) == 4  # every version kept
    assert (h.settings.wiki_dir / new_wid / pid / "decisions/0001.md").is_file()
    assert not (h.settings.wiki_dir / wid / pid).exists()
    assert "workspace: lab" in (h.settings.wiki_dir / new_wid / pid / "_meta.md").read_text()


def test_move_project_merge_conflict_policies(h: Harness) -> None:
    h.write("default", "app", "decisions/0001.md", "# A\nsource text")
    h.write("default", "app", "notes/same.md", "# Same\nidentical")
    h.write("default", "app", "notes/only.md", "# Only\nin source")
    h.write("lab", "app", "decisions/0001.md", "# A\ndestination text")
    h.write("lab", "app", "notes/same.md", "# Same\nidentical")
    with pytest.raises(AimemError) as e:
        h.run("project.move", {"to_workspace": "lab"}, "default", "app")
    assert e.value.status == 409 and e.value.data["conflicts"] == ["decisions/0001.md"]
    assert h.count("SELECT count(*) FROM projects") == 2  # nothing happened
    out = h.run("project.move", {"to_workspace": "lab", "on_conflict": "duplicate"}, "default", "app")
    assert out["moved_via"] == "copy-purge" and out["source_purged"]
    assert out["conflicts"] == [{"path": "decisions/0001.md", "moved_to": "decisions/0001-from-default.md"}]
    wid, pid = h.scope_ids("lab", "app")
    live = {r[0] for r in h.conn.execute("SELECT path FROM pages WHERE project_id = ? AND is_latest = 1", (pid,))}
    assert live == {"decisions/0001.md", "decisions/0001-from-default.md", "notes/same.md", "notes/only.md"}
    assert h.count("SELECT count(*) FROM projects") == 1


def test_move_project_overwrite(h: Harness) -> None:
    h.write("default", "app", "decisions/0001.md", "# A\nsource text")
    h.write("lab", "app", "decisions/0001.md", "# A\ndestination text")
    h.run("project.move", {"to_workspace": "lab", "on_conflict": "overwrite"}, "default", "app")
    _, pid = h.scope_ids("lab", "app")
    body = h.conn.execute("SELECT body FROM pages WHERE project_id = ? AND is_latest = 1", (pid,)).fetchone()[0]
    assert "source text" in body


def test_move_session_dry_run_then_confirm(h: Harness) -> None:
    populate(h)
    h.session("default", "tmp", "s-2", n_obs=2)
    h.write("default", "tmp", "sessions/s-2.md", "# s-2\nsummary", session_id="s-2")
    page = h.conn.execute("SELECT id, content_hash FROM pages WHERE session_id = 's-2' AND is_latest = 1").fetchone()
    h.conn.executemany("INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector, content_hash,"
                       " created_at) VALUES (?, ?, 'fake', 'm', 1, x'0000803f', ?, 'now')",
                       [(page[0], c, page[1]) for c in range(2)])
    chunk_ids = lambda: [r[0] for r in h.conn.execute(  # noqa: E731
        "SELECT id FROM page_chunk_embeddings WHERE page_id = ? ORDER BY chunk", (page[0],))]
    before = chunk_ids()
    with pytest.raises(AimemError) as e:
        h.run("session.move", {"session_id": "s-2", "to_project": "nowhere"})
    assert e.value.status == 404
    dry = h.run("session.move", {"session_id": "s-2", "to_project": "app"})
    assert dry["dry_run"] and dry["summary"]["observations"] == 2 and dry["page"] == "moved"
    _, tmp_pid = h.scope_ids("default", "tmp")
    assert h.count("SELECT count(*) FROM observations WHERE project_id = ?", tmp_pid) == 2  # rolled back
    out = h.run("session.move", {"session_id": "s-2", "to_project": "app", "dry_run": False})
    assert out["summary"] == dry["summary"] and out["session_moved"]
    wid, pid = h.scope_ids("default", "app")
    assert h.count("SELECT count(*) FROM observations WHERE session_id = 's-2' AND project_id = ?", pid) == 2
    assert (h.settings.wiki_dir / wid / pid / "sessions/s-2.md").is_file()
    assert h.count("SELECT count(*) FROM audit_log WHERE op = 'session.move'") == 1
    # The moved page keeps its id; its chunk rows get new, higher ids so readers reload them
    # with the page's new project.
    after = chunk_ids()
    assert len(after) == 2 and min(after) > max(before)
    with pytest.raises(AimemError) as e:
        h.run("session.move", {"from_project": "app", "to_project": "app", "dry_run": False})
    assert e.value.status == 422


def test_a_moved_session_page_takes_its_entities_along(h: Harness) -> None:
    """Entities are per project: the moved page is linked to the new project's entity of the same
    name, so a search of the new project finds it by that entity and one of the old does not
    (a link left behind made the page a hit of its old project, across workspaces too)."""
    from aimem_common.models import Scope
    from aimem_common.search.question import QueryOptions
    from aimem_common.search.query import memory_query

    def entity_hits(ws: str, pj: str, q: str) -> list[tuple[str, str]]:
        wid, pid = h.scope_ids(ws, pj)
        res = memory_query(h.conn, q, [Scope(ws, pj, wid, pid)], options=QueryOptions(explain=True)).to_json()
        return [(x["project"], x["path"]) for x in res["hits"] if "entity" in x["score_details"]["streams"]]

    populate(h)
    for sid, to in (("s-2", {"to_project": "app"}), ("s-3", {"to_workspace": "lab", "to_project": "secret"})):
        h.session("default", "tmp", sid, n_obs=2)
        h.write("default", "tmp", f"sessions/{sid}.md",
                f"---\nentities: [Zanzibar, Quokka]\n---\n# {sid}\nsummary of the work", session_id=sid)
        if "to_workspace" in to:
            h.write("lab", "secret", "notes/x.md", "# X\nsomething")  # the destination exists
        assert ("tmp", f"sessions/{sid}.md") in entity_hits("default", "tmp", "zanzibar")
        h.run("session.move", {"session_id": sid, **to, "dry_run": False})
        dest = ("default", "app") if "to_workspace" not in to else ("lab", "secret")
        assert entity_hits("default", "tmp", "zanzibar quokka") == []
        assert entity_hits(*dest, "zanzibar quokka") == [(dest[1], f"sessions/{sid}.md")]
    assert h.count("SELECT count(*) FROM entity_page_links l JOIN entities e ON e.id = l.entity_id"
                   " JOIN pages p ON p.id = l.page_id WHERE e.project_id != p.project_id") == 0


def test_move_session_open_guard_and_create(h: Harness) -> None:
    h.session("default", "tmp", "s-3", ended=False)
    with pytest.raises(AimemError) as e:
        h.run("session.move", {"session_id": "s-3", "to_project": "new", "create": True, "dry_run": False})
    assert e.value.status == 409
    dry = h.run("session.move", {"session_id": "s-3", "to_project": "new", "create": True, "force": True})
    assert dry["would_create_project"] is True
    assert h.count("SELECT count(*) FROM projects WHERE name = 'new'") == 0
    h.run("session.move", {"session_id": "s-3", "to_project": "new", "create": True, "force": True,
                           "dry_run": False})
    assert h.count("SELECT count(*) FROM sessions s JOIN projects p ON p.id = s.project_id WHERE p.name = 'new'") == 1


def test_restore_page_from_rev_and_page_id(h: Harness) -> None:
    first = h.write("default", "app", "notes/a.md", "# A\nversion one")
    repo = pygit2.Repository(str(h.settings.wiki_dir))
    rev = str(repo.head.target)
    h.write("default", "app", "notes/a.md", "# A\nversion two")
    out = h.run("page.restore", {"path": "notes/a.md", "rev": rev[:10]}, "default", "app")
    assert out["restored_from"] == {"rev": rev} and out["changed"]
    _, pid = h.scope_ids("default", "app")
    body = h.conn.execute("SELECT body FROM pages WHERE project_id = ? AND is_latest = 1", (pid,)).fetchone()[0]
    assert "version one" in body
    h.write("default", "app", "notes/a.md", "# A\nversion three")
    out = h.run("page.restore", {"page_id": first["page_id"]}, "default", "app")
    assert out["restored_from"] == {"page_id": first["page_id"]}
    for payload, status in (
        ({"path": "notes/a.md", "rev": "deadbeef"}, 500),
        ({"path": "notes/missing.md", "rev": rev}, 500),
        ({"page_id": 99999}, 404),
    ):
        with pytest.raises(AimemError) as e:
            h.run("page.restore", payload, "default", "app")
        assert e.value.status == status, payload
    assert h.count("SELECT count(*) FROM audit_log WHERE op = 'page.restore'") == 2


def test_users_keys_grants(h: Harness) -> None:
    h.run("user.create", {"name": "alice"})
    with pytest.raises(AimemError) as e:
        h.run("user.create", {"name": "alice"})
    assert e.value.status == 409
    key = h.run("apikey.create", {"user": "alice", "key_hash": "a" * 64, "prefix": "aim_abcdefgh"})
    h.run("grant.set", {"user": "alice", "workspace": "default", "project": "app", "can_write": True})
    assert h.count("SELECT can_write FROM grants") == 1
    assert h.run("apikey.revoke", {"key_id": key["id"]})["revoked"] is True
    assert h.run("apikey.revoke", {"key_id": key["id"]})["revoked"] is False
    h.run("user.delete", {"name": "alice"})
    assert h.count("SELECT count(*) FROM api_keys") == 0 and h.count("SELECT count(*) FROM grants") == 0
    with pytest.raises(AimemError) as e:
        h.run("apikey.create", {"user": "bob", "key_hash": "b" * 64, "prefix": "aim_x1234567"})
    assert e.value.status == 404
    ops = {r[0] for r in h.conn.execute("SELECT op FROM audit_log")}
    assert {"user.create", "apikey.create", "grant.set", "apikey.revoke", "user.delete"} <= ops


def test_session_reorg_two_folders_into_one_new_project_keyed_and_scoped(h: Harness) -> None:
    """session.reorg: two folders resolving to one project not made yet create it once (keyed
    by the root, as a hook would); a session already there stays; the source filter limits
    the run; a page clash is a skip that leaves the session whole; the preview is the run."""
    h.session("default", "docs", "s-a", cwd="/w/docs")
    h.session("default", "docs-old", "s-b", cwd="/w/docs/guide")
    h.session("default", "other", "s-c", cwd="/w/other")
    h.write("default", "docs", "sessions/s-a.md", "# s-a\nsummary", session_id="s-a")
    locs = [{"cwd": "/w/docs", "project": "handbook", "root": "/w/docs"},
            {"cwd": "/w/docs/guide", "project": "handbook", "root": "/w/docs"},
            {"cwd": "/w/other", "project": "other"}]
    dry = h.run("session.reorg", {"locations": locs})
    assert [s["session_id"] for s in dry["sessions"]] == ["s-a", "s-b"] and dry["unchanged"] == 1
    assert dry["created_projects"] == [{"workspace": "default", "project": "handbook"}]
    assert h.count("SELECT count(*) FROM projects WHERE name = 'handbook'") == 0
    only = h.run("session.reorg", {"locations": locs, "from_project": "docs-old"})
    assert [s["session_id"] for s in only["sessions"]] == ["s-b"] and only["unchanged"] == 0
    out = h.run("session.reorg", {"locations": locs, "dry_run": False})
    assert out["summary"] == dry["summary"] and out["moved"] == 2
    assert h.count("SELECT count(*) FROM projects WHERE name = 'handbook' AND root = '/w/docs'") == 1
    wid, pid = h.scope_ids("default", "handbook")
    assert h.count("SELECT count(*) FROM observations WHERE project_id = ?", pid) == 6
    assert (h.settings.wiki_dir / wid / pid / "sessions/s-a.md").is_file()
    assert h.count("SELECT count(*) FROM audit_log WHERE op = 'session.move'") == 2
    again = h.run("session.reorg", {"locations": locs, "dry_run": False})
    assert (again["moved"], again["unchanged"], again["created_projects"]) == (0, 3, [])

    # a page at the same path in the destination: skipped, nothing of that session moved
    h.session("default", "scratch", "s-d", cwd="/w/scratch")
    h.write("default", "scratch", "sessions/s-a.md", "# clash\nsame path", session_id="s-d")
    clash = h.run("session.reorg", {"locations": [{"cwd": "/w/scratch", "project": "handbook", "root": "/w/docs"}],
                                    "dry_run": False})
    assert clash["moved"] == 0 and [(s["session_id"], s["reason"]) for s in clash["skipped"]] == [("s-d", "page_exists")]
    _, spid = h.scope_ids("default", "scratch")
    assert h.count("SELECT count(*) FROM observations WHERE session_id = 's-d' AND project_id = ?", spid) == 3
    with pytest.raises(AimemError) as e:
        h.run("session.reorg", {"locations": locs, "from_workspace": "nowhere"})
    assert e.value.status == 404
    with pytest.raises(AimemError) as e:
        h.run("session.reorg", {"locations": [{"cwd": "/w/x", "project": "bad name!"}]})
    assert e.value.status == 400
