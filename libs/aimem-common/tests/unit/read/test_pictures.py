"""The reads behind the web's pictures (``read/pictures.py``): activity, strip, chains, link graph."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from aimem_common.auth import ROOT, Grant, Principal
from aimem_common.errors import NotFoundError
from aimem_common.read import pictures

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)  # the seeder clock starts at 2026-01-01T00:00


def test_activity_counts_sessions_and_observations_per_day_and_agent(pool, seeder):
    app = seeder.scope("default", "app")
    for i in range(3):
        seeder.observation(app, "s1", "user-prompt", f"p{i}")
    seeder.observation(app, "s2", "user-prompt", "hi", agent="codex")
    seeder.conn.execute("INSERT INTO sessions(workspace_id, project_id, session_id, agent, started_at, last_event_at)"
                        " VALUES (?,?,?,?,?,?)", (app.workspace_id, app.project_id, "old", "codex",
                                                  "2025-12-30T10:00:00Z", "2025-12-31T10:00:00Z"))
    with pool.connection() as conn:
        a = pictures.activity(conn, app, days=7, now=NOW)
        assert a["days"][-1] == "2026-01-01" and len(a["days"]) == 7
        assert a["agents"] == ["claude-code", "codex"]
        assert a["cells"][("2026-01-01", "claude-code")] == {"sessions": 1, "observations": 3}
        assert a["cells"][("2026-01-01", "codex")] == {"sessions": 1, "observations": 1}
        assert a["cells"][("2025-12-30", "codex")]["sessions"] == 1  # a session spanning two days counts on both
        assert a["cells"][("2025-12-31", "codex")]["sessions"] == 1
        assert a["max_observations"] == 4
        on_day = pictures.sessions_on_day(conn, app, "2025-12-31", agent="codex")
        assert [s["session_id"] for s in on_day] == ["old"]
        assert pictures.sessions_on_day(conn, app, "2025-12-31", agent="claude-code") == []
        assert {s["session_id"] for s in pictures.sessions_on_day(conn, app, "2026-01-01")} == {"s1", "s2"}


def test_strip_sorts_observations_into_prompts_tools_failures_compactions(pool, seeder):
    app = seeder.scope("default", "app")
    seeder.observation(app, "s1", "user-prompt", "fix it")
    seeder.observation(app, "s1", "post-tool-use", "ok", title="Bash")
    seeder.observation(app, "s1", "post-tool-use", "error: exit 1", title="Bash failed")
    seeder.observation(app, "s1", "pre-compact", "", title="compact")
    seeder.observation(app, "s1", "stop", "")
    with pool.connection() as conn:
        s = pictures.session_strip(conn, app, "s1")
        assert [m["category"] for m in s["marks"]] == ["prompt", "tool", "failure", "compaction", "other"]
        assert [m["index"] for m in s["marks"]] == [0, 1, 2, 3, 4] and s["left_out"] == 0
        capped = pictures.session_strip(conn, app, "s1", limit=2)
        assert len(capped["marks"]) == 2 and capped["total"] == 5 and capped["left_out"] == 3
        with pytest.raises(NotFoundError):
            pictures.session_strip(conn, app, "nope")


def _handoff(seeder, scope, title, status="open", *, frm=None, acc=None, by=None, sup=None, at="2026-01-01T00:00:00Z",
             automatic=0):
    return seeder.conn.execute(
        "INSERT INTO handoffs(workspace_id, project_id, automatic, from_agent, from_session_id, title, body, status,"
        " created_at, event_at, accepted_by, accepted_session_id, superseded_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (scope.workspace_id, scope.project_id, automatic, "claude-code", frm, title, "b", status, at, at, by, acc, sup),
    ).lastrowid


def test_chains_follow_claims_and_folds_and_mark_stale_open_ones(pool, seeder):
    app = seeder.scope("default", "app")
    h1 = _handoff(seeder, app, "first", "accepted", frm="s1", acc="s2", by="codex", at="2025-12-01T00:00:00Z")
    h2 = _handoff(seeder, app, "second", "accepted", frm="s2", acc="s3", by="claude-code", at="2025-12-02T00:00:00Z")
    h3 = _handoff(seeder, app, "third", "open", frm="s3", at="2025-12-03T00:00:00Z")
    old = _handoff(seeder, app, "folded", "superseded", frm="s0", sup=h1, at="2025-11-30T00:00:00Z", automatic=1)
    lone = _handoff(seeder, app, "<script>x</script>", "open", at="2025-12-31T12:00:00Z")
    with pool.connection() as conn:
        c = pictures.handoff_chains(conn, app, now=NOW)
        ids = [[link["id"] for link in chain] for chain in c["chains"]]
        assert ids == [[old, h1, h2, h3], [lone]]
        stale = {link["id"]: link["stale"] for chain in c["chains"] for link in chain}
        assert stale[h3] is True and stale[lone] is False  # open for four weeks vs twelve hours
        assert (c["open"], c["stale"], c["superseded"]) == (2, 1, 1)
        newest = pictures.handoff_chains(conn, app, now=NOW, limit=2)
        assert [[link["id"] for link in chain] for chain in newest["chains"]] == [[h3], [lone]]
        assert (newest["shown"], newest["total"]) == (2, 5)


def reader_of(project: str) -> Principal:
    return Principal(kind="user", name=f"user:{project}-reader", user_id=9, grants=(Grant("default", project, True, False),))


def test_page_graph_has_links_backlinks_entities_and_hides_unreadable_projects(pool, seeder):
    app = seeder.scope("default", "app")
    secret = seeder.scope("default", "secret")
    seeder.page(app, "a.md", "# A\n[[b]]", entities=["retry"])
    seeder.page(app, "b.md", "# B\n[[c]]")
    seeder.page(app, "c.md", "# C\n")
    seeder.page(app, "d.md", "# D\n[[a]]")
    seeder.page(app, "e.md", "# E\n", entities=["retry"])
    seeder.page(secret, "s.md", "# Zanzibar\n[[app:a.md]]")
    with pool.connection() as conn:
        one = pictures.page_graph(conn, app, "a.md", reader=ROOT)
        assert {n["path"]: n["hop"] for n in one["nodes"]} == {"a.md": 0, "b.md": 1, "d.md": 1, "e.md": 1, "s.md": 1}
        assert {e["kind"] for e in one["edges"]} == {"link", "entity"}
        mine = pictures.page_graph(conn, app, "a.md", hops=2, reader=reader_of("app"))
        assert {n["path"]: n["hop"] for n in mine["nodes"]} == {"a.md": 0, "b.md": 1, "d.md": 1, "e.md": 1, "c.md": 2}
        assert "zanzibar" not in repr(mine).lower()
        capped = pictures.page_graph(conn, app, "a.md", hops=2, max_nodes=2, reader=reader_of("app"))
        assert len(capped["nodes"]) == 2 and capped["left_out"] == 2 and capped["nodes"][0]["center"]
        assert capped["more"] and not mine["more"]
        with pytest.raises(NotFoundError):
            pictures.page_graph(conn, app, "zz.md", reader=ROOT)


def test_project_graph_keeps_the_most_connected_pages(pool, seeder):
    app = seeder.scope("default", "app")
    seeder.page(app, "hub.md", "# Hub\n" + " ".join(f"[[p{i}]]" for i in range(12)))
    for i in range(12):
        seeder.page(app, f"p{i}.md", f"# P{i}\n" + ("[[p0]]" if i else ""))
    with pool.connection() as conn:
        g = pictures.project_graph(conn, app, max_nodes=5)
        assert [n["path"] for n in g["nodes"]][:2] == ["hub.md", "p0.md"]
        assert g["nodes"][0]["hop"] == 0 and all(n["hop"] == 1 for n in g["nodes"][1:])
        assert g["total"] == 13 and g["left_out"] == 8
        assert all(e["from"] in {n["id"] for n in g["nodes"]} for e in g["edges"])
