"""Issue 26, class 2: one folder is one place however a client spells it (writer side).

Drive-letter case, ``\\`` vs ``/`` and a trailing separator once made several projects of
one Windows folder, and a handoff left under one spelling was never found from another.
"""

from __future__ import annotations

from aimem_writer.ops.handoffs import place_matches


def projects(wh) -> dict[str, tuple]:
    return {r[0]: (r[1], r[2]) for r in wh.conn.execute("SELECT name, root, origin FROM projects")}


def test_windows_spellings_of_one_repository_are_one_project(wh) -> None:
    for sid, root in (("s1", r"C:\Users\Dev\api"), ("s2", "c:/Users/Dev/api/"), ("s3", "C:\\Users\\dev\\API\\"),
                      ("s4", r"\\?\C:\Users\Dev\api")):
        wh.obs(sid, "user-prompt", "Prompt: x", "x", pj="api", root=root)
    assert projects(wh) == {"api": ("c:/users/dev/api", None)}
    # A POSIX root with a trailing slash is the same root too; case stays significant there.
    wh.obs("p1", "user-prompt", "Prompt: y", "y", pj="web", root="/home/dev/web")
    wh.obs("p2", "user-prompt", "Prompt: y", "y", pj="web", root="/home/dev/web/")
    wh.obs("p3", "user-prompt", "Prompt: y", "y", pj="web", root="/home/dev/Web")
    assert {k: v for k, v in projects(wh).items() if k.startswith("web")} == {
        "web": ("/home/dev/web", None), "web-2": ("/home/dev/Web", None)}


def test_a_handoff_left_under_one_windows_spelling_reaches_another(wh) -> None:
    root = r"C:\Users\Dev\api"
    wh.obs("a", "user-prompt", "Prompt: work", "w", cwd=r"C:\Users\Dev\api\src", pj="api", root=root)
    hid = wh.ok("session.end", {"session_id": "a", "cwd": r"C:\Users\Dev\api\src"}, pj="api", root=root)["handoff_id"]
    assert hid is not None
    got = wh.ok("handoff.accept", {"cwd": "c:/users/dev/api/", "session_id": "b"}, pj="api", root="c:/users/dev/api/")
    assert got["handoff"] is not None and got["handoff"]["id"] == hid


def test_place_matching_is_spelling_blind_on_windows_and_bounded() -> None:
    assert place_matches(r"C:\Repo", None, "c:/repo/", None)
    assert place_matches(None, r"C:\Repo", None, r"c:\repo\sub")
    assert place_matches(None, r"\\server\share\repo", None, "//SERVER/share/repo/x")
    assert not place_matches(None, r"C:\Repo", None, r"C:\Repo-old")
    assert not place_matches(None, "/w/App", None, "/w/app")  # POSIX stays case-sensitive


def test_migration_16_brings_stored_locations_to_the_normalised_form(wh, tmp_path) -> None:
    """A store of schema 13 with roots and handoff places as clients spelled them."""
    import sqlite3

    from aimem_common.db.schema import MIGRATIONS, SCHEMA_VERSION
    from aimem_common.db.trigram import unspaced

    data = tmp_path / "old-data"
    (data / "db").mkdir(parents=True)
    old = sqlite3.connect(data / "db" / "memory.sqlite")
    old.create_function("aimem_unspaced", 1, unspaced, deterministic=True)  # migration 13 uses it
    for version, sql in MIGRATIONS:
        if version <= 13:
            old.executescript(sql)
    old.executescript(
        "INSERT INTO workspaces VALUES ('w1', 'default', '2026-01-01T00:00:00Z');"
        "INSERT INTO projects(id, workspace_id, name, created_at, root) VALUES"
        " ('p1', 'w1', 'api', '2026-01-01T00:00:00Z', 'C:\\Users\\Dev\\api\\'),"
        " ('p2', 'w1', 'web', '2026-01-01T00:00:00Z', '/home/dev/Web/'),"
        " ('p3', 'w1', 'share', '2026-01-01T00:00:00Z', '\\\\Srv\\Share\\x'),"
        " ('p4', 'w1', 'top', '2026-01-01T00:00:00Z', '/');"
        "INSERT INTO handoffs(workspace_id, project_id, automatic, cwd, root, title, body, status, created_at)"
        " VALUES ('w1', 'p1', 1, 'C:/Users/Dev/api/src', 'C:/Users/Dev/api', 'Continue', 'from before', 'open',"
        " '2026-01-01T00:00:00Z');"
        "PRAGMA user_version = 13;")
    old.commit()
    old.close()
    wh2 = type(wh)(data)
    try:
        assert wh2.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert dict(wh2.conn.execute("SELECT id, root FROM projects")) == {
            "p1": "c:/users/dev/api", "p2": "/home/dev/Web", "p3": "//srv/share/x", "p4": "/"}
        assert wh2.conn.execute("SELECT cwd, root FROM handoffs").fetchone()[:] == ("c:/users/dev/api/src",
                                                                                   "c:/users/dev/api")
        # The old project and its handoff are found from today's spelling.
        got = wh2.ok("handoff.accept", {"cwd": r"c:\Users\Dev\api", "session_id": "n"}, pj="api",
                     root=r"C:\Users\Dev\api")
        assert got["handoff"]["body"] == "from before" and got["project"] == "api"
    finally:
        wh2.close()
