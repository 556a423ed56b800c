"""Issue 26, class 6: a renamed, moved or second checkout keeps its project and its handoffs.

A project found by its origin or by the repository's stable id (``repo_id``, which the hook
client keeps in the git directory) at a root it has not been seen at records that root as an
alias; handoffs of the project then match from any of its roots. A same-named folder with no
identity hint stays another project (never a silent merge).
"""

from __future__ import annotations

from aimem_common.read import scopes, status

RID = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def _end(wh, sid: str, root: str, pj: str = "api", **keys) -> int:
    wh.obs(sid, "user-prompt", "Prompt: work", f"work in {root}", cwd=root, pj=pj, root=root, **keys)
    return wh.ok("session.end", {"session_id": sid, "cwd": root}, pj=pj, root=root, **keys)["handoff_id"]


def _accept(wh, sid: str, root: str, pj: str = "api", **keys):
    return wh.ok("handoff.accept", {"cwd": root + "/src", "session_id": sid}, pj=pj, root=root, **keys)["handoff"]


def test_a_moved_checkout_without_origin_keeps_its_project_and_handoff(wh) -> None:
    hid = _end(wh, "a", "/home/dev/api", repo_id=RID)
    # Moved (renamed folder): same repository id, new root, no origin.
    wh.obs("b", "session-start", "start", "", cwd="/home/dev/api-renamed", pj="api-renamed",
           root="/home/dev/api-renamed", repo_id=RID)
    assert [r[0] for r in wh.conn.execute("SELECT name FROM projects")] == ["api"]
    got = _accept(wh, "b", "/home/dev/api-renamed", pj="api-renamed", repo_id=RID)
    assert got is not None and got["id"] == hid
    scope = scopes.find(wh.conn, "default", "api")
    assert scopes.project_roots(wh.conn, scope.project_id) == ["/home/dev/api", "/home/dev/api-renamed"]
    st = status.status(wh.conn, scope)
    assert (st["root"], st["aliases"]) == ("/home/dev/api", ["/home/dev/api-renamed"])
    listed = scopes.list_workspaces(wh.conn)[0]["projects"][0]
    assert listed["aliases"] == ["/home/dev/api-renamed"]
    assert status.project_sizes(wh.conn)[0]["aliases"] == ["/home/dev/api-renamed"]
    # And back at the old root (a second checkout, or moved back) the next handoff arrives too.
    hid2 = _end(wh, "b", "/home/dev/api-renamed", pj="api-renamed", repo_id=RID)
    assert _accept(wh, "c", "/home/dev/api", repo_id=RID)["id"] == hid2


def test_a_moved_checkout_with_origin_is_found_by_it_and_gets_the_handoff(wh) -> None:
    hid = _end(wh, "a", "/w/api", origin="github.com/acme/api")
    assert _accept(wh, "b", "/w2/api", origin="github.com/acme/api")["id"] == hid
    scope = scopes.find(wh.conn, "default", "api")
    assert status.status(wh.conn, scope)["aliases"] == ["/w2/api"]


def test_a_same_named_folder_without_a_hint_is_never_merged(wh) -> None:
    hid = _end(wh, "a", "/home/dev/api", repo_id=RID)
    # Another repository that happens to be called api: another id, or none at all.
    wh.obs("b", "session-start", "start", "", cwd="/tmp/api", pj="api", root="/tmp/api", repo_id=OTHER)
    wh.obs("c", "session-start", "start", "", cwd="/srv/api", pj="api", root="/srv/api")
    names = sorted(r[0] for r in wh.conn.execute("SELECT name FROM projects"))
    assert names == ["api", "api-2", "api-3"]
    assert _accept(wh, "b", "/tmp/api", pj="api", repo_id=OTHER) is None
    assert _accept(wh, "c", "/srv/api", pj="api") is None
    assert wh.count("SELECT count(*) FROM handoffs WHERE id = ? AND status = 'open'", hid) == 1
    # A fresh repository at the very root an old one had (another id) is another project too.
    third = "ab" * 16
    wh.obs("d", "session-start", "start", "", cwd="/home/dev/api", pj="api", root="/home/dev/api", repo_id=third)
    assert wh.count("SELECT count(*) FROM projects WHERE repo_id = ?", third) == 1
    assert wh.count("SELECT count(*) FROM projects") == 4
    assert wh.count("SELECT count(*) FROM project_roots") == 0  # nothing was aliased


def test_a_project_made_before_ids_adopts_the_id_and_keeps_its_handoffs(wh) -> None:
    hid = _end(wh, "a", "/home/dev/tool", pj="tool")  # older client: root only
    wh.obs("b", "session-start", "start", "", cwd="/home/dev/tool", pj="tool", root="/home/dev/tool", repo_id=RID)
    # The upgraded client's first event at the old root records the id ...
    assert wh.count("SELECT count(*) FROM projects WHERE repo_id = ?", RID) == 1
    # ... so after a move the project and its handoff follow.
    assert _accept(wh, "c", "/opt/tool", pj="tool", repo_id=RID)["id"] == hid
    assert [r[0] for r in wh.conn.execute("SELECT name FROM projects")] == ["tool"]


def test_purging_a_project_drops_its_aliases(wh) -> None:
    _end(wh, "a", "/w/api", origin="github.com/acme/api")
    _accept(wh, "b", "/w2/api", origin="github.com/acme/api")
    assert wh.count("SELECT count(*) FROM project_roots") == 1
    wh.ok("project.purge", {"force": True}, pj="api")
    assert wh.count("SELECT count(*) FROM project_roots") == 0


def test_a_marker_named_project_follows_its_moved_checkout_but_not_a_namesake(wh) -> None:
    hid = _end(wh, "a", "/w/billing", pj="billing", explicit=True, repo_id=RID)
    # Another repository that commits the same marker name: same project, its own handoffs.
    wh.obs("b", "session-start", "start", "", cwd="/w/other", pj="billing", root="/w/other", explicit=True,
           repo_id=OTHER)
    assert _accept(wh, "b", "/w/other", pj="billing", explicit=True, repo_id=OTHER) is None
    # The same repository, moved: its handoff follows it.
    assert _accept(wh, "c", "/w2/billing", pj="billing", explicit=True, repo_id=RID)["id"] == hid
    scope = scopes.find(wh.conn, "default", "billing")
    assert status.status(wh.conn, scope)["aliases"] == ["/w2/billing"]


def test_the_manifest_keeps_the_id_and_aliases_and_a_rebuild_restores_them(wh) -> None:
    from aimem_common.db.connect import open_writer
    from aimem_common.wikifmt import parse_meta
    from aimem_writer.reindex import rebuild

    _end(wh, "a", "/home/dev/api", repo_id=RID)
    wh.obs("b", "session-start", "start", "", cwd="/srv/api", pj="api", root="/srv/api", repo_id=RID)
    meta = parse_meta((wh.scope_dir(pj="api") / "_meta.md").read_text())
    assert (meta["root"], meta["repo_id"], meta["aliases"]) == ("/home/dev/api", RID, ["/srv/api"])
    wh.close()
    for p in wh.settings.db_path.parent.glob("memory.sqlite*"):
        p.unlink()
    rebuild(wh.settings)
    wh.conn = open_writer(wh.settings.db_path)
    scope = scopes.find(wh.conn, "default", "api")
    assert scopes.project_roots(wh.conn, scope.project_id) == ["/home/dev/api", "/srv/api"]
    assert scopes.repo_id_of(wh.conn, scope.project_id) == RID


def test_an_import_from_a_renamed_checkout_sees_the_session_hooks_captured_live(wh) -> None:
    """``import_known`` (what ingress asks before publishing an import batch) finds the project
    by the batch's repository id like the writer does: a transcript read in the renamed
    checkout of a session captured live at the old root is ``captured_live``, not resent."""
    from aimem_common.read.imports import import_known

    wh.obs("live", "user-prompt", "Prompt: work", "work", cwd="/home/dev/api", pj="api", root="/home/dev/api",
           repo_id=RID)
    got = import_known(wh.conn, "default", "api-renamed", root="/home/dev/api-renamed", origin=None, explicit=False,
                       keys=[], session_ids=["live", "old"], repo_id=RID)
    assert got.live == {"live"}
    other = import_known(wh.conn, "default", "api-renamed", root="/home/dev/api-renamed", origin=None,
                         explicit=False, keys=[], session_ids=["live"], repo_id=OTHER)
    assert other.live == set()
