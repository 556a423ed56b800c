"""The link degrees the writer keeps (``page_degrees``, migration 22) equal a recount from
``links`` after any mix of the writes that change links: page writes and batches, deletes,
restores, session pages (end, move, purge), the forget sweep (expire, evict, purge), hand
edits on disk, project and workspace purges; the rebuild from the wiki and the migration's
back-fill count the same. Each project's ``link_graph_versions`` counts up whenever what its
graph shows changes (the kept drawings' key).

Everything runs through the real batch path (``Applier.apply``) on a real SQLite and git wiki.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from aimem_common.db.connect import migrate, open_writer
from aimem_common.db.schema import SCHEMA_VERSION
from aimem_testing.seed import Seeder, kept_degrees, recount_degrees
from aimem_writer.reindex import index_hand_edits, rebuild

SCOPES = [("default", "app"), ("default", "lab"), ("team", "infra")]
PATHS = [f"notes/p{i}.md" for i in range(5)] + ["hub.md"]


def graph_of(conn) -> dict[str, tuple]:
    """``{project id: (live page ids, counted links)}``: what a project's graph is drawn from."""
    live: dict[str, set] = {}
    for pid, proj in conn.execute("SELECT id, project_id FROM pages WHERE is_latest = 1"):
        live.setdefault(proj, set()).add(pid)
    edges: dict[str, list] = {}
    for a, b, proj in conn.execute(
            "SELECT l.from_page_id, l.to_page_id, s.project_id FROM links l JOIN pages s ON s.id = l.from_page_id"
            " JOIN pages t ON t.id = l.to_page_id WHERE s.is_latest = 1 AND t.is_latest = 1"
            " AND s.project_id = t.project_id AND l.from_page_id != l.to_page_id"):
        edges.setdefault(proj, []).append((a, b))
    return {p: (frozenset(ids), tuple(sorted(edges.get(p, [])))) for p, ids in live.items()}


def versions(conn) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute("SELECT project_id, version FROM link_graph_versions")}


def link(target: tuple[int, str, bool], here: tuple[str, str]) -> str:
    """A link to ``target`` (scope index, path, as a markdown link?) written in project ``here``."""
    scope_i, path, markdown = target
    ws, pj = SCOPES[scope_i]
    if (ws, pj) == here:
        return f"[to]({'/' + path})" if markdown else f"[[{path[:-3]}]]"
    return f"[[{pj}:{path[:-3]}]]" if ws == here[0] else f"[[{ws}/{pj}:{path[:-3]}]]"


targets = st.lists(st.tuples(st.integers(0, len(SCOPES) - 1), st.sampled_from(PATHS), st.booleans()), max_size=5)


class DegreeMachine(RuleBasedStateMachine):
    """Random writes against one writer; after each, the kept degrees are a recount.
    ``harness``: the writer tests' ``WriterHarness`` class (the ``wh`` fixture's)."""

    def __init__(self, harness: type) -> None:
        super().__init__()
        self.harness = harness

    @initialize()
    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="degrees-"))
        self.wh = self.harness(self.tmp / "data")
        self.graph = graph_of(self.wh.conn)
        self.versions = versions(self.wh.conn)
        self.n = 0
        self.live = 0  # live pages after the last step: rules that need one wait for it

    def teardown(self) -> None:
        if hasattr(self, "wh"):
            self.wh.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _live_ids(self, scope_i: int | None = None) -> list[int]:
        sql = "SELECT p.id FROM pages p JOIN projects pj ON pj.id = p.project_id WHERE p.is_latest = 1"
        args: tuple = ()
        if scope_i is not None:
            sql += " AND pj.name = ?"
            args = (SCOPES[scope_i][1],)
        return [r[0] for r in self.wh.conn.execute(sql + " ORDER BY p.id", args)]

    def _try(self, op: str, payload: dict, ws: str, pj: str | None) -> None:
        """Apply ``op``; a scope that does not exist (yet, or any more) is the one refusal allowed."""
        reply = self.wh.run(op, payload, ws, pj)
        assert reply["ok"] or reply["error"]["code"] == "not_found", reply

    def _body(self, here: tuple[str, str], links: list, extra: str = "") -> str:
        return f"# Page {self.n}\n" + " ".join(link(t, here) for t in links) + extra

    @rule(scope_i=st.integers(0, len(SCOPES) - 1), path=st.sampled_from(PATHS), links=targets,
          twice=st.booleans())
    def write(self, scope_i, path, links, twice) -> None:
        self.n += 1
        here = SCOPES[scope_i]
        extra = f" [me](/{path}) [[{path[:-3]}]]" if twice else ""  # self links, doubled
        self.wh.ok("page.write", {"path": path, "body": self._body(here, links, extra)}, *here)

    @rule(scope_i=st.integers(0, len(SCOPES) - 1),
          pages=st.lists(st.tuples(st.sampled_from(PATHS), targets), min_size=1, max_size=4, unique_by=lambda x: x[0]))
    def write_batch(self, scope_i, pages) -> None:
        self.n += 1
        here = SCOPES[scope_i]
        self.wh.ok("page.write_batch", {"pages": [{"path": p, "body": self._body(here, ls)} for p, ls in pages]}, *here)

    @precondition(lambda self: self.live > 0)
    @rule(scope_i=st.integers(0, len(SCOPES) - 1), path=st.sampled_from(PATHS))
    def delete(self, scope_i, path) -> None:
        self._try("page.delete", {"path": path}, *SCOPES[scope_i])

    @precondition(lambda self: self.live > 0)
    @rule(scope_i=st.integers(0, len(SCOPES) - 1), pick=st.integers(0, 50))
    def restore(self, scope_i, pick) -> None:
        old = [r[0] for r in self.wh.conn.execute(
            "SELECT p.id FROM pages p JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = pj.workspace_id"
            " WHERE p.is_latest = 0 AND w.name = ? AND pj.name = ? ORDER BY p.id", SCOPES[scope_i])]
        if old:
            self.wh.ok("page.restore", {"page_id": old[pick % len(old)]}, *SCOPES[scope_i])

    @rule(sid=st.sampled_from(["s1", "s2"]), links=targets)
    def session_page(self, sid, links) -> None:
        """A session ends in app (its page is written) and a page of app links to it."""
        where = {r[0] for r in self.wh.conn.execute("SELECT p.name FROM sessions s JOIN projects p"
                                                    " ON p.id = s.project_id WHERE s.session_id = ?", (sid,))}
        if where - {"app"}:
            return  # moved away: its next events would make a second session of that id
        self.wh.obs(sid, "user-prompt", "Prompt: go", "go")
        self.wh.obs(sid, "session-end", "Session end")
        self.wh.ok("session.end", {"session_id": sid, "cwd": "/w/app"})
        self.n += 1
        self.wh.ok("page.write", {"path": "notes/p0.md", "body": self._body(SCOPES[0], links, f" [[sessions/{sid}]]")})

    @precondition(lambda self: self.live > 0)
    @rule(sid=st.sampled_from(["s1", "s2"]), to=st.sampled_from(["lab", "app"]),
          pages=st.sampled_from(["move", "regenerate"]))
    def session_move(self, sid, to, pages) -> None:
        rows = self.wh.conn.execute("SELECT p.name FROM sessions s JOIN projects p ON p.id = s.project_id"
                                    " WHERE s.session_id = ?", (sid,)).fetchall()
        if len(rows) == 1 and rows[0][0] != to:
            self.wh.ok("session.move", {"session_id": sid, "to_project": to, "pages": pages, "force": True,
                                        "create": True, "dry_run": False}, "default", rows[0][0])

    @precondition(lambda self: self.live > 0)
    @rule(sid=st.sampled_from(["s1", "s2"]))
    def session_purge(self, sid) -> None:
        rows = self.wh.conn.execute("SELECT p.name FROM sessions s JOIN projects p ON p.id = s.project_id"
                                    " WHERE s.session_id = ?", (sid,)).fetchall()
        if len(rows) == 1:
            self.wh.ok("session.purge", {"session_id": sid, "force": True}, "default", rows[0][0])
            self.wh.ok("purge.lift", {"session_id": sid}, "default", rows[0][0])

    @precondition(lambda self: self.live > 0)
    @rule(scope_i=st.integers(0, len(SCOPES) - 1), how=st.sampled_from(["expire", "evict"]), pick=st.integers(0, 50))
    def sweep(self, scope_i, how, pick) -> None:
        ids = self._live_ids(scope_i)
        if ids:
            self.wh.ok("sweep.apply", {f"{how}_page_ids": [ids[pick % len(ids)]]}, *SCOPES[scope_i])

    @precondition(lambda self: self.live > 0)
    @rule(scope_i=st.integers(0, len(SCOPES) - 1))
    def sweep_purge(self, scope_i) -> None:
        ids = [r[0] for r in self.wh.conn.execute(
            "SELECT p.id FROM pages p JOIN projects pj ON pj.id = p.project_id WHERE p.retired_reason = 'evicted'"
            " AND pj.name = ?", (SCOPES[scope_i][1],))]
        if ids:
            self.wh.ok("sweep.apply", {"purge_page_ids": ids}, *SCOPES[scope_i])

    @rule(scope_i=st.integers(0, len(SCOPES) - 1), path=st.sampled_from(PATHS), links=targets, remove=st.booleans())
    def hand_edit(self, scope_i, path, links, remove) -> None:
        here = SCOPES[scope_i]
        row = self.wh.conn.execute("SELECT w.id, p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                                   " WHERE w.name = ? AND p.name = ?", here).fetchone()
        if row is None:
            return
        rel = f"{row[0]}/{row[1]}/{path}"
        file = self.wh.wiki.root / rel
        if remove:
            file.unlink(missing_ok=True)
        else:
            self.n += 1
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(self._body(here, links) + "\n", encoding="utf-8")
        index_hand_edits(self.wh.applier, [rel])

    @precondition(lambda self: self.live > 0)
    @rule(scope_i=st.sampled_from([1, 2]))
    def purge_project(self, scope_i) -> None:
        ws, pj = SCOPES[scope_i]
        if self.wh.conn.execute("SELECT 1 FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                                " WHERE w.name = ? AND p.name = ?", (ws, pj)).fetchone():
            if ws == "team":
                self.wh.ok("workspace.purge", {"workspace": ws, "force": True}, ws, None)
            else:
                self.wh.ok("project.purge", {"force": True}, ws, pj)
            if ws == "team":
                self.wh.run("purge.lift", {"workspace_only": True}, ws, pj)
            self.wh.run("purge.lift", {}, ws, pj)

    @invariant()
    def degrees_are_a_recount(self) -> None:
        if not hasattr(self, "wh"):
            return
        conn = self.wh.conn
        assert kept_degrees(conn) == recount_degrees(conn)
        graph, vers = graph_of(conn), versions(conn)
        for proj, shown in graph.items():
            assert proj in vers, "a project with live pages has a graph version"
            if proj in self.graph and shown != self.graph[proj]:
                assert vers[proj] > self.versions.get(proj, 0), "the graph changed, its version did not"
        assert set(vers) <= {r[0] for r in conn.execute("SELECT id FROM projects")}  # purged projects leave none
        self.graph, self.versions = graph, vers
        self.live = sum(len(ids) for ids, _ in graph.values())


@pytest.mark.timeout(900)
def test_kept_degrees_equal_a_recount_after_any_mix_of_writes(wh) -> None:
    """Hypothesis draws the mixes: ``AIMEM_DEGREE_EXAMPLES`` of them (15 by default, each up to
    20 steps through the real batch path and its git checkpoints; raise it for a long run)."""
    run_state_machine_as_test(lambda: DegreeMachine(type(wh)), settings=settings(
        max_examples=int(os.environ.get("AIMEM_DEGREE_EXAMPLES", "15")), stateful_step_count=20, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_a_hub_and_its_pages_keep_their_degrees_through_supersession_and_delete(wh) -> None:
    """A concrete walk: the hub's degree follows writes, a rewrite of the hub (its backlinks
    repointed to the new version), a delete (backlinks unresolved) and the page's return."""
    for i in range(4):
        wh.ok("page.write", {"path": f"p{i}.md", "body": f"# P{i}\n[[hub]] [[p{(i + 1) % 4}]]"})
    wh.ok("page.write", {"path": "hub.md", "body": "# Hub\n[[p0]] [[hub]] [p0](p0.md)"})  # self link, doubled link

    def degree(path: str) -> int:
        return wh.count("SELECT d.degree FROM page_degrees d JOIN pages p ON p.id = d.page_id"
                        " WHERE p.path = ? AND p.is_latest = 1", path)

    assert degree("hub.md") == 4 + 2 and degree("p0.md") == 1 + 1 + 1 + 2
    wh.ok("page.write", {"path": "hub.md", "body": "# Hub v2\nno links now"})
    assert degree("hub.md") == 4 and degree("p0.md") == 3
    wh.ok("page.delete", {"path": "hub.md"})
    assert wh.count("SELECT count(*) FROM page_degrees d JOIN pages p ON p.id = d.page_id WHERE p.path = 'hub.md'") == 0
    assert [degree(f"p{i}.md") for i in range(4)] == [2, 2, 2, 2]
    wh.ok("page.write", {"path": "hub.md", "body": "# Hub is back"})  # the dangling links resolve again
    assert degree("hub.md") == 4 and kept_degrees(wh.conn) == recount_degrees(wh.conn)


def test_rebuild_from_the_wiki_counts_the_same_degrees(wh) -> None:
    wh.ok("page.write", {"path": "a.md", "body": "# A\n[[b]] [[c]] [[lab:a]]"})
    wh.ok("page.write", {"path": "b.md", "body": "# B\n[[a]] [b](a.md)"})
    wh.ok("page.write", {"path": "c.md", "body": "# C\n[[missing]]"})
    wh.ok("page.write", {"path": "a.md", "body": "# A\n[[c]]"}, pj="lab")
    before = {(p, d) for p, d in wh.conn.execute(
        "SELECT p.path || '@' || p.project_id, d.degree FROM page_degrees d JOIN pages p ON p.id = d.page_id")}
    settings_ = wh.settings
    wh.close()
    for suffix in ("", "-wal", "-shm"):
        settings_.db_path.with_name(settings_.db_path.name + suffix).unlink(missing_ok=True)
    rebuild(settings_)
    conn = open_writer(settings_.db_path)
    try:
        after = {(p, d) for p, d in conn.execute(
            "SELECT p.path || '@' || p.project_id, d.degree FROM page_degrees d JOIN pages p ON p.id = d.page_id")}
        assert after == before and sorted(d for _, d in after) == [0, 1, 3, 4]
        assert kept_degrees(conn) == recount_degrees(conn)
    finally:
        conn.close()
    wh.conn = open_writer(settings_.db_path)  # the fixture closes it


def test_migration_22_back_fills_the_degrees_of_an_existing_store(tmp_path) -> None:
    """A store at version 21 (written without the triggers) gets the recounted degrees."""
    seed = Seeder(tmp_path / "m.sqlite")
    c = seed.conn
    for trig in ("links_degree_insert", "links_degree_delete", "links_degree_unlink", "links_degree_relink",
                 "pages_degree_insert", "pages_degree_update", "pages_degree_delete", "projects_degree_delete"):
        c.execute(f"DROP TRIGGER {trig}")
    c.execute("DROP TABLE page_degrees")
    c.execute("DROP TABLE link_graph_versions")
    c.execute("DROP TABLE profile_entries")  # migration 23, after 22: back to what 21 had
    c.execute("DROP INDEX ingest_keys_project")  # and migration 24
    c.execute("ALTER TABLE ingest_keys DROP COLUMN project_id")
    c.execute("PRAGMA user_version = 21")
    app, lab = seed.scope("default", "app"), seed.scope("default", "lab")
    for i in range(30):
        seed.page(app, f"n{i}.md", f"# N{i}\n[[n{(i * 7) % 30}]] [[n{i % 3}]] [[lab:x{i % 4}]]")
        seed.page(lab, f"x{i % 4}.md", f"# X\n[[x{(i + 1) % 4}]]")
    seed.page(app, "n5.md", "# N5 again\n[[n1]]")
    expected = recount_degrees(c)
    assert migrate(c) == SCHEMA_VERSION
    assert kept_degrees(c) == expected and max(expected.values()) > 3
    assert {r[0] for r in c.execute("SELECT project_id FROM link_graph_versions")} == {app.project_id, lab.project_id}
    seed.page(app, "n6.md", "# N6\n[[n0]]")  # the triggers from here on
    assert kept_degrees(c) == recount_degrees(c)
    seed.close()


@pytest.mark.parametrize("cascade", [False, True])
def test_a_project_deleted_by_cascade_leaves_no_degree_or_version(tmp_path, cascade) -> None:
    seed = Seeder(tmp_path / "m.sqlite")
    app, lab = seed.scope("default", "app"), seed.scope("default", "lab")
    for s in (app, lab):
        seed.page(s, "a.md", "# A\n[[b]]")
        seed.page(s, "b.md", "# B\n[[a]]")
    if cascade:
        seed.conn.execute("DELETE FROM workspaces WHERE id = ?", (app.workspace_id,))  # projects, pages cascade
    else:
        seed.conn.execute("DELETE FROM projects WHERE id = ?", (app.project_id,))
    assert seed.conn.execute("SELECT count(*) FROM page_degrees").fetchone()[0] == (0 if cascade else 2)
    assert seed.conn.execute("SELECT count(*) FROM link_graph_versions").fetchone()[0] == (0 if cascade else 1)
    assert kept_degrees(seed.conn) == recount_degrees(seed.conn)
    seed.close()
