"""Issue 26, classes 2, 6 and 8 on the client side (``aimem_cli.identity``, ``aimem init``).

2. a Windows cwd outside a repository names its project by its last folder, as on POSIX;
6. a checkout reached through a symlink is its physical root, and a repository carries a
   stable id in its git directory, so a moved checkout without ``origin`` is recognised;
8. a marker in an ancestor folder stops at a repository boundary (unless ``scope = "tree"``),
   and ``aimem init`` refuses to write one outside any repository without ``--force``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_testing.gitrepo import git, make_repo
from aimem_cli.identity import resolve

AIMEM = str(Path(sys.executable).with_name("aimem"))


# -- 2: Windows locations --------------------------------------------------------------------
@pytest.mark.parametrize("cwd", [r"C:\Users\Dev\notes", "c:/Users/Dev/notes/", r"C:\Users\Dev\notes" + "\\",
                                 r"\\fileserver\home\Dev\notes"])
def test_a_windows_cwd_outside_a_repository_is_named_by_its_folder(cwd: str) -> None:
    ident = resolve(cwd)
    assert (ident.project, ident.root, ident.source) == ("notes", None, "cwd")


def test_the_hook_client_sends_a_windows_cwd_by_its_folder_name(tmp_path: Path) -> None:
    """Through ``aimem hook`` (spooled, the server unreachable): the spooled identity's name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(tmp_path / "data"), AIMEM_INGRESS_URL="http://127.0.0.1:9",
               AIMEM_HOOK_BUDGET_MS="300")
    payload = {"session_id": "w1", "cwd": "C:\\Users\\Dev\\My Notes\\", "hook_event_name": "UserPromptSubmit",
               "prompt": "hi"}
    proc = subprocess.run([AIMEM, "hook", "--agent", "claude-code", "--event", "UserPromptSubmit"],
                          input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spooled = [json.loads(line) for f in (tmp_path / "data" / "spool").rglob("*") if f.is_file()
               for line in f.read_text().splitlines() if line.startswith("{")]
    idents = [e["id"] for e in spooled if isinstance(e, dict) and "id" in e]
    assert idents and idents[0]["project"] == "my-notes", spooled  # a Windows name: lower-case


# -- 6: symlinks and moved checkouts -------------------------------------------------------------
def test_a_symlinked_checkout_resolves_to_its_physical_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "real" / "api")
    (repo / "src").mkdir()
    link = tmp_path / "link-to-api"
    link.symlink_to(repo)
    via_link, direct = resolve(link / "src"), resolve(repo / "src")
    assert via_link.root == direct.root == str(repo)
    assert via_link.project == "api"


def test_a_moved_checkout_without_origin_keeps_its_repository_id(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api")
    first = resolve(repo)
    assert first.repo_id and len(first.repo_id) == 32 and first.as_query()["repo_id"] == first.repo_id
    assert resolve(repo).repo_id == first.repo_id  # stable: written once into the git directory
    moved = tmp_path / "renamed-api"
    repo.rename(moved)
    after = resolve(moved)
    assert (after.repo_id, after.root, after.project) == (first.repo_id, str(moved), "renamed-api")
    git(moved, "worktree", "add", "-q", str(tmp_path / "api-wt"))
    assert resolve(tmp_path / "api-wt").repo_id == first.repo_id  # worktrees share their repository's id
    other = make_repo(tmp_path / "other" / "api")
    assert resolve(other).repo_id != first.repo_id  # one folder name, another repository


def test_no_repository_id_outside_a_repository(tmp_path: Path) -> None:
    d = tmp_path / "plain"
    d.mkdir()
    assert resolve(d).repo_id is None and "repo_id" not in resolve(d).as_query()


# -- 8: ancestor markers --------------------------------------------------------------------------
def test_an_ancestor_marker_stops_at_a_repository(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".aimem.toml").write_text('workspace = "me"\nproject = "everything"\nexclude = ["*.pem"]\n')
    a, b = make_repo(home / "src" / "a"), make_repo(home / "src" / "b")
    ia, ib = resolve(a / "x"), resolve(b)
    assert (ia.project, ia.root, ia.explicit, ia.source) == ("a", str(a), False, "git")
    assert (ib.project, ib.root) == ("b", str(b))
    assert ia.workspace is None  # names stop at the repository boundary
    # Rules that only ever record less still apply below (fail safe).
    assert not ia.should_capture(str(a / "key.pem")) and ia.should_capture(str(a / "x.py"))
    (home / ".aimem.toml").write_text('project = "everything"\ncapture = false\n')
    assert resolve(a).capture is False
    # Outside any repository the marker applies as before.
    (home / "notes").mkdir()
    (home / ".aimem.toml").write_text('workspace = "me"\nproject = "everything"\n')
    n = resolve(home / "notes")
    assert (n.project, n.workspace, n.explicit) == ("everything", "me", True)


def test_an_ancestor_marker_with_scope_tree_spans_repositories(tmp_path: Path) -> None:
    (tmp_path / ".aimem.toml").write_text('workspace = "acme"\nproject = "platform"\nscope = "tree"\n')
    a = make_repo(tmp_path / "svc-a")
    ia = resolve(a)
    assert (ia.project, ia.workspace, ia.explicit, ia.source) == ("platform", "acme", True, "marker")


def test_a_marker_inside_the_repository_still_wins(tmp_path: Path) -> None:
    (tmp_path / ".aimem.toml").write_text('project = "everything"\n')
    repo = make_repo(tmp_path / "api")
    (repo / ".aimem.toml").write_text('project = "billing"\n')
    assert resolve(repo / "x").project == "billing"


def test_aimem_init_refuses_outside_a_repository_without_force(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run([AIMEM, "init"], cwd=home, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and not (home / ".aimem.toml").exists()
    assert "not inside a git repository" in out.stderr and "--force" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    forced = subprocess.run([AIMEM, "init", "--force", "--project", "notes"], cwd=home, capture_output=True,
                            text=True, timeout=60)
    assert forced.returncode == 0, forced.stderr
    assert resolve(home).project == "notes"


def test_the_hook_client_stays_light() -> None:
    """The normaliser it shares with the server is stdlib only: no pydantic on the hot path."""
    code = ("import sys, aimem_cli.hookclient; "
            "print(sorted(m for m in sys.modules if m.startswith(('aimem_common', 'pydantic', 'httpx', 'typer'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(eval(out.stdout))  # noqa: S307 - our own subprocess's repr of a list of names
    stdlib_only = {"aimem_common", "aimem_common.locations", "aimem_common.text", "aimem_common.kinds"}
    assert {m for m in loaded if not m.startswith("aimem_common.clients")} <= stdlib_only, loaded


def test_racing_hooks_agree_on_one_repository_id(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api")
    code = "import sys; from aimem_cli.identity import resolve; print(resolve(sys.argv[1]).repo_id)"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo)], stdout=subprocess.PIPE, text=True)
             for _ in range(6)]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(ids) == 1 and ids == {(repo / ".git" / "aimem-id").read_text().strip()}
    assert sorted(f.name for f in (repo / ".git").iterdir() if "aimem-id" in f.name) == ["aimem-id"]
