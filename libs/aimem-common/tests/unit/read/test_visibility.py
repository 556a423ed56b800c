"""What a reader of one project sees of another (``read/visibility.py`` and its callers)."""

from __future__ import annotations

import pytest

from aimem_common.auth import ROOT, Grant, Principal
from aimem_common.errors import NotFoundError
from aimem_common.read import messages, pages, sessions, visibility
from aimem_common.search.query import resolve_search_scopes


def reader_of(project: str) -> Principal:
    """A user with a read grant on ``default/<project>`` only."""
    return Principal(kind="user", name=f"user:{project}-reader", user_id=9,
                     grants=(Grant("default", project, True, False),))


@pytest.fixture
def two(seeder):
    """``app`` (readable) and ``secret`` (not): pages linking both ways, one session in both, messages."""
    app = seeder.scope("default", "app")
    secret = seeder.scope("default", "secret")
    seeder.page(app, "concepts/retry.md", "# Retry\nRetry with the same id. See [[secret:concepts/shared.md]].")
    seeder.page(secret, "concepts/shared.md", "# Zanzibar shared\nSecret side.")
    seeder.page(secret, "decisions/zanzibar-plan.md", "# Zanzibar plan\nLinks [[app:concepts/retry.md]].")
    seeder.observation(app, "s1", "user-prompt", "in app")
    seeder.observation(secret, "s1", "user-prompt", "zanzibar in secret")
    seeder.observation(secret, "s1", "user-prompt", "zanzibar again")
    seeder.end_session(app, "s1")
    for frm, to in ((secret, app), (app, secret)):
        seeder.conn.execute(
            "INSERT INTO agent_messages(from_workspace_id, from_project_id, to_workspace_id, to_project_id, body,"
            " created_at) VALUES (?,?,?,?,?,?)",
            (frm.workspace_id, frm.project_id, to.workspace_id, to.project_id, f"to {to.project}", seeder.tick()))
    return app, secret


def test_backlinks_and_links_show_only_readable_projects(pool, two):
    app, _ = two
    with pool.connection() as conn:
        as_root = pages.get_page(conn, app, path="concepts/retry.md", reader=ROOT)
        assert [(b["project"], b["path"]) for b in as_root["backlinks"]] == [("secret", "decisions/zanzibar-plan.md")]
        assert as_root["links"][0]["resolved"] is True
        mine = pages.get_page(conn, app, path="concepts/retry.md", reader=reader_of("app"))
        assert mine["backlinks"] == []
        # the link as written stays (it is app's own text), but nothing says the target exists
        assert [(l["to_project"], l["to_path"], l["page_id"], l["resolved"]) for l in mine["links"]] == [
            ("secret", "concepts/shared.md", None, False)]
        assert pages.get_page(conn, app, path="concepts/retry.md")["backlinks"] == []  # no reader: fail closed


def test_graph_leaves_out_unreadable_projects(pool, two):
    app, _ = two
    with pool.connection() as conn:
        full = pages.graph(conn, app, reader=ROOT)
        assert {n["path"] for n in full["nodes"]} == {"concepts/retry.md", "concepts/shared.md",
                                                      "decisions/zanzibar-plan.md"}
        g = pages.graph(conn, app, reader=reader_of("app"))
        assert [n["path"] for n in g["nodes"]] == ["concepts/retry.md"]
        assert [(e["to"], e["resolved"], e["to_path"]) for e in g["edges"]] == [(None, False, "concepts/shared.md")]
        assert "zanzibar" not in repr(g).lower()


def test_message_counterparts_and_elided_rows(pool, two):
    app, _ = two
    me = reader_of("app")
    with pool.connection() as conn:
        inbox = messages.list_messages(conn, app, reader=me)
        outbox = messages.list_messages(conn, app, box="outbox", reader=me)
        assert [(m["from_workspace"], m["from_project"], m["body"]) for m in inbox] == [(None, None, "to app")]
        assert [(m["to_workspace"], m["to_project"], m["body"]) for m in outbox] == [(None, None, "to secret")]
        assert messages.list_messages(conn, app, reader=ROOT)[0]["from_project"] == "secret"
        assert sessions.session_observations(conn, app, "s1", reader=me)["elided_other_scope"] == 0
        assert sessions.session_observations(conn, app, "s1", reader=ROOT)["elided_other_scope"] == 2


def test_unknown_and_unreadable_projects_answer_the_same(pool, two):
    me = reader_of("app")
    with pool.connection() as conn:
        errors = []
        for ws, pj in (("default", "secret"), ("default", "nope"), ("ghost", "secret")):
            with pytest.raises(NotFoundError) as e:
                visibility.resolve_readable(conn, me, ws, pj)
            errors.append((e.value.status, e.value.code, e.value.message.replace(f"{ws}/{pj}", "X")))
        with pytest.raises(NotFoundError) as e:
            resolve_search_scopes(conn, workspace="default", project="secret", reader=me)
        errors.append((e.value.status, e.value.code, e.value.message.replace("default/secret", "X")))
        assert set(errors) == {(404, "not_found", "project X not found")}
        assert visibility.resolve_readable(conn, me, "default", "app").project == "app"
        with pytest.raises(NotFoundError) as e:  # root still learns which part is missing
            visibility.resolve_readable(conn, ROOT, "default", "nope")
        assert e.value.code == "project_not_found"
        assert visibility.readable(conn, me).project_ids == frozenset({two[0].project_id})
        assert visibility.readable(conn, ROOT) is visibility.EVERYTHING
