"""Issue 26, classes 2, 6 and 8 end to end: real ``aimem hook`` → ingress → nats-server → writer.

* a Windows cwd (drive-letter case, separators, trailing separator) is one place, named by its
  folder, and its handoff reaches the next session whatever the spelling;
* a checkout reached through a symlink, then renamed (no ``origin``), keeps its project and its
  pending handoff; the new root is listed as an alias;
* a marker in an ancestor folder does not pull the repositories below it into one project.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from aimem_testing.gitrepo import make_repo, wait_for
from tests.e2e.test_identity_lifecycle import Client, Store, sid

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def win_hook(client: Client, event: str, session: str, run_in: Path, win_cwd: str, **fields) -> str:
    """``aimem hook`` as a Windows agent calls it: the payload's cwd is a Windows path (the hook
    process itself runs in ``run_in``); return its stdout."""
    payload = {"session_id": session, "cwd": win_cwd, "hook_event_name": event, **fields}
    proc = subprocess.run([str(Path(sys.executable).with_name("aimem")), "hook", "--agent", "claude-code",
                           "--event", event], input=json.dumps(payload).encode(), env=client.env(),
                          capture_output=True, timeout=60, cwd=run_in)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def _stack(services, settings, tmp_path: Path) -> tuple[dict, Client, Store]:
    procs = services("writer", "ingress", "query")
    return procs, Client(procs["ingress"].url, tmp_path / "client"), Store(settings.db_path)


@pytest.mark.timeout(600)
def test_windows_spellings_of_one_folder_are_one_place(services, settings, tmp_path: Path) -> None:
    _, client, store = _stack(services, settings, tmp_path)
    plain = tmp_path / "plain"  # where the hook process runs for the Windows payloads: no repository
    plain.mkdir()

    # 2. Windows spellings of one folder: one project named by its folder, one handoff chain.
    w1, here = sid("win"), "C:\\Users\\Dev\\My Notes\\"
    win_hook(client, "SessionStart", w1, plain, here, source="startup")
    win_hook(client, "UserPromptSubmit", w1, plain, here, prompt="sort the reading list")
    win_hook(client, "SessionEnd", w1, plain, here, reason="exit")
    wait_for(lambda: store.handoff(w1), what="the Windows session's handoff")
    assert store.project_of(w1) == "default/my-notes"  # a Windows folder's name is lower-case
    w2 = sid("win2")  # another case of the last folder too: still the same place and project
    out = win_hook(client, "SessionStart", w2, plain, "c:/USERS/dev/MY NOTES", source="startup")
    assert w1 in out and "sort the reading list" in out
    wait_for(lambda: store.project_of(w2), what="the second Windows session")
    assert store.project_of(w2) == "default/my-notes"


@pytest.mark.timeout(600)
def test_a_symlinked_then_renamed_checkout_keeps_its_project_and_handoff(services, settings, tmp_path: Path) -> None:
    procs, client, store = _stack(services, settings, tmp_path)
    # 6. A checkout through a symlink and its physical path is one root; renamed, it keeps its
    #    project and its pending handoff (no origin: the repository id finds it).
    real = make_repo(tmp_path / "real" / "notes-api")
    link = tmp_path / "link-notes-api"
    link.symlink_to(real)
    s1 = sid("link")
    assert client.session(s1, link, "add the search endpoint") == ""
    h1 = wait_for(lambda: store.handoff(s1), what="the symlinked session's handoff")
    assert h1["root"] == str(real) and store.project_of(s1) == "default/notes-api"
    s2 = sid("physical")
    ctx = client.start(s2, real)
    assert s1 in ctx and "add the search endpoint" in ctx
    client.work(s2, real, "page the search results")
    client.end(s2, real)
    wait_for(lambda: store.handoff(s2), what="the physical-path session's handoff")
    renamed = real.with_name("notes-service")
    real.rename(renamed)
    link.unlink()
    s3 = sid("renamed")
    ctx = client.start(s3, renamed)
    assert s2 in ctx and "page the search results" in ctx
    wait_for(lambda: store.project_of(s3), what="the renamed checkout's session")
    assert store.project_of(s3) == "default/notes-api"
    listing = httpx.get(procs["query"].url + "/api/v1/workspaces", timeout=10).json()
    by_name = {p["project"]: p for ws in listing if ws["workspace"] == "default" for p in ws["projects"]}
    assert by_name["notes-api"]["root"] == str(real) and by_name["notes-api"]["aliases"] == [str(renamed)]
    assert "notes-service" not in by_name and "link-notes-api" not in by_name


@pytest.mark.timeout(600)
def test_an_ancestor_marker_does_not_join_the_repositories_below(services, settings, tmp_path: Path) -> None:
    _, client, store = _stack(services, settings, tmp_path)
    # 8. A marker in an ancestor folder: the repositories below stay their own projects.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".aimem.toml").write_text('project = "everything"\n')
    a, b = make_repo(home / "src" / "alpha"), make_repo(home / "src" / "beta")
    m1 = sid("alpha")
    assert client.session(m1, a, "alpha: bump the parser") == ""
    wait_for(lambda: store.handoff(m1), what="alpha's handoff")
    m2 = sid("beta")
    assert client.start(m2, b) == ""  # alpha's handoff is not beta's
    wait_for(lambda: store.project_of(m2), what="beta's session")
    assert (store.project_of(m1), store.project_of(m2)) == ("default/alpha", "default/beta")
    assert store.handoff(m1)["status"] == "open"
