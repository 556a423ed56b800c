"""``read.pages.tree``: one folder of the live page tree by a skip scan; ``versions``."""

from __future__ import annotations

from aimem_common.db.connect import open_writer
from aimem_common.models import Scope
from aimem_common.read.pages import tree, versions

PATHS = ["a.md", "b/x.md", "b/y.md", "b/c/z.md", "c.md", "d/e.md", "z.md", "b0.md", "b.md"]


def _db(tmp_path):
    c = open_writer(tmp_path / "t.sqlite")
    c.execute("INSERT INTO workspaces VALUES ('w', 'default', 't')")
    c.execute("INSERT INTO projects (id, workspace_id, name, created_at) VALUES ('p', 'w', 'app', 't')")
    for path in PATHS + ["old.md"]:
        c.execute("INSERT INTO pages(workspace_id, project_id, path, title, body, kind, tier, content_hash,"
                  " created_at, updated_at, is_latest) VALUES ('w', 'p', ?, ?, 'x', 'note', 'semantic', 'h', 't',"
                  " 't', ?)", (path, path.upper(), 0 if path == "old.md" else 1))
    c.commit()
    return c, Scope("default", "app", "w", "p")


def test_tree_lists_subfolders_with_counts_and_the_folders_own_pages(tmp_path):
    c, s = _db(tmp_path)
    root = tree(c, s)
    assert [(f["name"], f["path"], f["pages"]) for f in root["folders"]] == [("b", "b/", 3), ("d", "d/", 1)]
    assert [p["path"] for p in root["pages"]] == ["a.md", "b.md", "b0.md", "c.md", "z.md"]  # not the retired one
    sub = tree(c, s, "b/")
    assert [(f["path"], f["pages"]) for f in sub["folders"]] == [("b/c/", 1)]
    assert [p["name"] for p in sub["pages"]] == ["x.md", "y.md"] and not sub["truncated"]
    cut = tree(c, s, "", limit=2)
    assert cut["truncated"] and [p["path"] for p in cut["pages"]] == ["a.md", "b.md"]
    assert [f["path"] for f in cut["folders"]] == ["b/", "d/"]


def test_versions_newest_first(tmp_path):
    c, s = _db(tmp_path)
    c.execute("UPDATE pages SET is_latest = 0, retired_reason = 'superseded' WHERE path = 'c.md'")
    c.execute("INSERT INTO pages(workspace_id, project_id, path, title, body, kind, tier, content_hash,"
              " created_at, updated_at) VALUES ('w', 'p', 'c.md', 'C2', 'two', 'note', 'semantic', 'h2', 't', 'u')")
    c.commit()
    v = versions(c, s, "c.md")
    assert [(x["title"], x["is_latest"]) for x in v] == [("C2", True), ("C.MD", False)]
    assert v[1]["retired_reason"] == "superseded" and v[0]["body_chars"] == 3
    assert versions(c, s, "nope.md") == []
