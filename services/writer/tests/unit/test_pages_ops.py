"""page.write / write_batch / delete / access / feedback through the real batch path."""

from __future__ import annotations

import json
import os

import pygit2
import pytest


def test_write_creates_page_file_fts_and_meta(wh) -> None:
    res = wh.ok("page.write", {"path": "concepts/retry.md", "body": "# Retry policy\n\nBackoff with jitter.\n",
                               "frontmatter": {"tags": ["nats"], "entities": ["JetStream", "jetstream "]}})
    assert res["created"] and res["version"] == 1 and res["title"] == "Retry policy"
    assert res["kind"] == "concept" and res["tier"] == "semantic"
    f = wh.page_file("concepts/retry.md")
    text = f.read_text()
    assert text.startswith("---\ntitle: Retry policy\n") and "Backoff with jitter." in text
    assert (wh.scope_dir() / "_meta.md").is_file() and (wh.scope_dir().parent / "_meta.md").is_file()
    assert wh.count("SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'jitter'") == 1
    assert wh.count("SELECT count(*) FROM entities") == 1  # normalised: one entity
    assert wh.count("SELECT count(*) FROM entity_page_links") == 1
    assert wh.count("SELECT count(*) FROM audit_log WHERE op = 'page.write'") == 1
    assert [e.kind for e in wh.events] == ["project.created", "page.changed"]


def test_supersession_keeps_history_and_identical_rewrite_is_noop(wh) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "one"})
    b = wh.ok("page.write", {"path": "notes/a.md", "body": "two"})
    assert b["supersedes"] == a["page_id"] and b["version"] == 2 and not b["created"]
    c = wh.ok("page.write", {"path": "notes/a.md", "body": "two"})
    assert c["changed"] is False and c["page_id"] == b["page_id"]
    rows = wh.conn.execute("SELECT id, is_latest, retired_reason FROM pages ORDER BY id").fetchall()
    assert [(r[1], r[2]) for r in rows] == [(0, "superseded"), (1, None)]
    assert wh.count("SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'one'") == 0
    assert wh.count("SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'two'") == 1


def test_preconditions(wh) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "one", "create_only": True})
    err = wh.err("page.write", {"path": "notes/a.md", "body": "x", "create_only": True})
    assert err["code"] == "precondition_failed" and err["data"]["current_page_id"] == a["page_id"]
    err = wh.err("page.write", {"path": "notes/a.md", "body": "x", "expected_page_id": a["page_id"] + 99})
    assert err["data"]["current_page_id"] == a["page_id"]
    assert wh.err("page.write", {"path": "notes/a.md", "body": "x", "expected_page_id": 0})["code"] == \
        "precondition_failed"
    ok = wh.ok("page.write", {"path": "notes/a.md", "body": "two", "expected_page_id": a["page_id"]})
    assert ok["supersedes"] == a["page_id"]
    assert wh.ok("page.write", {"path": "notes/new.md", "body": "n", "expected_page_id": 0})["created"]


@pytest.mark.parametrize("path,code", [
    ("../escape.md", "invalid_path"),
    ("/etc/passwd.md", "invalid_path"),
    ("notes/a\x00b.md", "invalid_path"),
    ("notes/../../x.md", "invalid_path"),
    ("notes/a.txt", "invalid_path"),
    ("_meta.md", "invalid_path"),
    ("log-2026-01.md", "invalid_path"),
])
def test_bad_paths_are_refused_and_nothing_is_written(wh, path, code) -> None:
    err = wh.err("page.write", {"path": path, "body": "x"})
    assert err["code"] == code and "path" in err["message"]
    assert wh.count("SELECT count(*) FROM pages") == 0
    assert wh.count("SELECT count(*) FROM projects") == 0  # the scope was not created either
    assert not any(p.is_file() and p.name != ".gitignore" for p in wh.wiki.root.rglob("*") if ".git" not in p.parts)


def test_symlink_out_of_the_wiki_is_refused(wh, tmp_path) -> None:
    wh.ok("page.write", {"path": "notes/a.md", "body": "x"})
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, wh.scope_dir() / "evil")
    err = wh.err("page.write", {"path": "evil/pwned.md", "body": "x"})
    assert err["code"] == "invalid_path" and "symlink" in err["message"]
    os.symlink(outside / "t.md", wh.scope_dir() / "notes" / "link.md")
    assert wh.err("page.write", {"path": "notes/link.md", "body": "x"})["code"] == "invalid_path"
    assert list(outside.iterdir()) == []
    assert wh.count("SELECT count(*) FROM pages") == 1


def test_oversized_and_nul_bodies(wh) -> None:
    err = wh.err("page.write", {"path": "notes/big.md", "body": "x" * (256 * 1024 + 1)})
    assert err["code"] == "invalid_payload" and "larger" in err["message"]
    assert wh.err("page.write", {"path": "notes/n.md", "body": "a\x00b"})["code"] == "invalid_payload"
    wh.settings.writer.max_page_bytes = 1000
    assert wh.err("page.write", {"path": "notes/m.md", "body": "y" * 1001})["code"] == "payload_too_large"
    assert wh.count("SELECT count(*) FROM pages") == 0


@pytest.mark.parametrize("body,fm", [
    ("---\ntitle: [unclosed\n---\nbody", {}),
    ("---\n- a list\n---\nbody", {}),
    ("---\ntitle: never closed\nbody", {}),
    ("body", {"pinned": "yes"}),
    ("body", {"tags": {"a": 1}}),
    ("body", {"expires_at": "next tuesday"}),
    ("body", {"tier": "forever"}),
])
def test_malformed_frontmatter_is_refused(wh, body, fm) -> None:
    err = wh.err("page.write", {"path": "notes/fm.md", "body": body, "frontmatter": fm})
    assert err["code"] == "invalid_frontmatter"
    assert wh.count("SELECT count(*) FROM pages") == 0


def test_body_frontmatter_is_merged_and_expires_at_normalised(wh) -> None:
    res = wh.ok("page.write", {"path": "_slots/focus.md", "body": "---\ntags: [a]\nsalience: 1.5\n---\nFocus now\n",
                               "expires_at": "2030-01-02"})
    row = wh.conn.execute("SELECT * FROM pages WHERE id = ?", (res["page_id"],)).fetchone()
    assert row["pinned"] == 1 and row["expires_at"] == "2030-01-02T00:00:00Z" and row["salience"] == 1.5
    assert json.loads(row["tags"]) == ["a"] and row["body"] == "Focus now\n"


def test_write_batch_is_all_or_nothing(wh) -> None:
    pages = [{"path": f"notes/{i}.md", "body": f"page {i}"} for i in range(3)]
    assert len(wh.ok("page.write_batch", {"pages": pages})["pages"]) == 3
    bad = [{"path": "notes/x.md", "body": "x"}, {"path": "notes/0.md", "body": "y", "create_only": True}]
    err = wh.err("page.write_batch", {"pages": bad})
    assert err["code"] == "precondition_failed" and err["data"]["index"] == 1
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'notes/x.md'") == 0
    assert not wh.page_file("notes/x.md").exists()
    assert wh.err("page.write_batch", {"pages": []})["code"] == "invalid_payload"
    assert wh.err("page.write_batch", {"pages": pages * 34})["code"] == "invalid_payload"  # 102 > 100


def test_delete_is_idempotent_and_checkpoints_first(wh) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "keep me in history"})
    res = wh.ok("page.delete", {"path": "notes/a.md"})
    assert res == {"deleted": True, "page_id": a["page_id"], "path": "notes/a.md"}
    assert not wh.page_file("notes/a.md").exists()
    assert wh.ok("page.delete", {"path": "notes/a.md"})["deleted"] is False
    # The write and the delete never saw a debounced checkpoint; the delete took one first.
    repo = pygit2.Repository(str(wh.wiki.root))
    rel = str(wh.page_file("notes/a.md").relative_to(wh.wiki.root))
    commit = repo[repo.head.target]
    assert "pre-delete" in commit.message
    assert b"keep me in history" in repo[commit.tree[rel].id].data
    wh.applier.checkpoint()
    assert rel not in wh.wiki.head_tree_paths()
    assert wh.err("page.delete", {"path": "notes/a.md"}, pj="nope")["code"] == "not_found"


def test_links_resolve_deferred_and_across_projects(wh) -> None:
    src = wh.ok("page.write", {"path": "concepts/a.md",
                               "body": "See [[decisions/0001.md]], [[infra:runbooks/nats.md]], "
                                       "[[other/lib:api.md|API]] and [b](../concepts/b.md). `[[code.md]]`"})
    links = wh.conn.execute("SELECT to_workspace, to_project, to_path, to_page_id, link_kind FROM links"
                            " ORDER BY id").fetchall()
    assert [tuple(r) for r in links] == [
        (None, None, "decisions/0001.md", None, "wikilink"),
        (None, "infra", "runbooks/nats.md", None, "wikilink"),
        ("other", "lib", "api.md", None, "wikilink"),
        (None, None, "concepts/b.md", None, "markdown"),
    ]
    d = wh.ok("page.write", {"path": "decisions/0001.md", "body": "decided"})
    n = wh.ok("page.write", {"path": "runbooks/nats.md", "body": "runbook"}, pj="infra")
    api = wh.ok("page.write", {"path": "api.md", "body": "api"}, ws="other", pj="lib")
    wrong = wh.ok("page.write", {"path": "runbooks/nats.md", "body": "same path, other workspace"},
                  ws="other", pj="infra")
    got = {r[0]: r[1] for r in wh.conn.execute("SELECT to_path, to_page_id FROM links")}
    assert got["decisions/0001.md"] == d["page_id"]
    assert got["runbooks/nats.md"] == n["page_id"] != wrong["page_id"]
    assert got["api.md"] == api["page_id"]
    # A new version of the target keeps the link resolved; deleting it leaves it dangling.
    d2 = wh.ok("page.write", {"path": "decisions/0001.md", "body": "decided again"})
    assert wh.count("SELECT to_page_id FROM links WHERE to_path = 'decisions/0001.md'") == d2["page_id"]
    wh.ok("page.delete", {"path": "decisions/0001.md"})
    assert wh.conn.execute("SELECT to_page_id FROM links WHERE to_path='decisions/0001.md'").fetchone()[0] is None
    assert src["page_id"]


def test_access_bump_is_throttled_and_scoped(wh) -> None:
    a = wh.ok("page.write", {"path": "notes/a.md", "body": "x"})
    other = wh.ok("page.write", {"path": "notes/a.md", "body": "x"}, pj="b")
    r1 = wh.ok("page.access", {"page_ids": [a["page_id"], other["page_id"], 999999], "at": "2030-01-01T00:00:00Z"})
    assert r1["bumped"] == [a["page_id"]] and r1["skipped"] == 2
    assert wh.ok("page.access", {"page_ids": [a["page_id"]], "at": "2030-01-01T00:00:30Z"})["bumped"] == []
    assert wh.ok("page.access", {"page_ids": [a["page_id"]], "at": "2030-01-01T00:01:01Z"})["bumped"] == [a["page_id"]]
    assert wh.count("SELECT access_count FROM pages WHERE id = ?", a["page_id"]) == 2
    assert wh.count("SELECT count FROM page_access WHERE page_id = ?", a["page_id"]) == 3


def test_feedback_moves_salience(wh) -> None:
    wh.ok("page.write", {"path": "notes/a.md", "body": "x"})
    assert wh.ok("page.feedback", {"path": "notes/a.md", "signal": "helpful"})["salience"] == 1.2
    assert wh.ok("page.feedback", {"path": "notes/a.md", "signal": "wrong", "reason": "outdated"})["salience"] == 0.8
    for _ in range(10):
        s = wh.ok("page.feedback", {"path": "notes/a.md", "signal": "wrong"})["salience"]
    assert s == 0.05
    assert wh.count("SELECT count(*) FROM page_feedback") == 12
    assert wh.err("page.feedback", {"path": "notes/none.md", "signal": "helpful"})["code"] == "not_found"
    assert wh.err("page.feedback", {"path": "notes/a.md", "signal": "meh"})["code"] == "invalid_payload"


def test_same_path_in_two_projects_and_two_workspaces_never_crosses(wh) -> None:
    scopes = [("default", "app"), ("default", "lib"), ("team", "app"), ("team", "lib")]
    ids = {}
    for ws, pj in scopes:
        ids[(ws, pj)] = wh.ok("page.write", {"path": "notes/same.md", "body": f"body of {ws}/{pj}"}, ws, pj)["page_id"]
    assert len(set(ids.values())) == 4
    dirs = {wh.scope_dir(ws, pj) for ws, pj in scopes}
    assert len(dirs) == 4
    for ws, pj in scopes:
        assert f"body of {ws}/{pj}" in wh.page_file("notes/same.md", ws, pj).read_text()
    wh.ok("page.write", {"path": "notes/same.md", "body": "updated team/app"}, "team", "app")
    wh.ok("page.delete", {"path": "notes/same.md"}, "default", "lib")
    wh.ok("page.feedback", {"path": "notes/same.md", "signal": "wrong"}, "team", "lib")
    live = {(r[0], r[1]): (r[2], r[3]) for r in wh.conn.execute(
        "SELECT w.name, p.name, pg.body, pg.salience FROM pages pg JOIN projects p ON p.id = pg.project_id"
        " JOIN workspaces w ON w.id = pg.workspace_id WHERE pg.is_latest = 1")}
    assert live == {("default", "app"): ("body of default/app\n", None),
                    ("team", "app"): ("updated team/app\n", None),
                    ("team", "lib"): ("body of team/lib\n", 0.6)}
    assert wh.page_file("notes/same.md", "default", "app").exists()
    assert not wh.page_file("notes/same.md", "default", "lib").exists()
