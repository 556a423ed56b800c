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
