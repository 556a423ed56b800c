"""``aimem`` workstream commands against a small stand-in query/admin server (stdlib HTTP on
loopback): what they refuse before asking, and what they print after a run."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

WID = "b54b" + "0" * 28


def _one_workstream(method: str, path: str, body: object) -> tuple[int, object]:
    """Answers ``GET …/workstreams`` with one workstream, a delete with its counts."""
    if method == "GET":
        return 200, [{"id": WID, "name": "wsrepo", "checkout_root": "/nowhere", "harnesses": [], "live_run": None,
                      "events": 11}]
    return 200, {"dry_run": False, "name": "wsrepo", "workstream_id": WID, "workstream_events_deleted": 11,
                 "managed_runs_deleted": 3}


@pytest.fixture
def one_workstream(json_server):
    with json_server(_one_workstream) as s:
        yield s


@pytest.mark.parametrize("verb", [["workstream-delete", "--confirm"], ["workstream-delete"], ["show"],
                                  ["resume"]])
@pytest.mark.parametrize("ref", ["", "  "])
def test_a_blank_workstream_is_refused_before_the_server_is_asked(verb, ref, one_workstream) -> None:
    r = CliRunner().invoke(build_app(), [verb[0], ref, *verb[1:], "-w", "w", "-p", "proj",
                                         "--server", one_workstream.url, "--token", "t"])
    assert r.exit_code == 1, r.output
    assert r.output.strip() == "aimem: the workstream is empty; pass its id (or a prefix) or its name" \
        or r.output.strip().endswith("the workstream is empty; pass its id (or a prefix) or its name"), r.output
    assert len(r.output.strip().splitlines()) == 1 and one_workstream.requests == []


def test_a_real_prefix_still_deletes(one_workstream) -> None:
    r = CliRunner().invoke(build_app(), ["workstream-delete", "b54b", "--confirm", "-w", "w", "-p", "proj",
                                         "--server", one_workstream.url, "--token", "t"])
    assert r.exit_code == 0, r.output
    assert f"Deleted workstream 'wsrepo' ({WID}) of w/proj: 11 ledger events, 3 runs." in r.output
    assert ("POST", "/admin/workstream-delete") in [(m, p) for m, p, _ in one_workstream.requests]


def _lease_ingress(method: str, path: str, body: dict) -> tuple[int, dict]:
    """Stands in for ingress's ``/hook/workstream/*`` routes."""
    path = path.split("?", 1)[0]
    if path == "/hook/workstream/lease":
        ws = {"id": WID, "name": "wt", "checkout_root": body.get("checkout_root") or ""}
        return 200, {"run": {"harness": body.get("harness") or "claude-code", "workstream": ws,
                             "started_at": "2026-01-01T00:00:00Z", "resume_session_id": None}}
    return 200, {"appended": 1 if path == "/hook/workstream/append" else 0}


def _bodies(server) -> list[tuple[str, dict]]:
    return [(p.split("?", 1)[0], b) for _, p, b in server.requests]


def _git(repo, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _stub_bin(tmp_path, name: str):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / name).write_text("#!/bin/sh\nexit 0\n")
    (d / name).chmod(0o755)
    return d


def test_a_run_in_a_linked_worktree_keeps_its_own_workstream_and_checkpoint(tmp_path, json_server) -> None:
    import os

    from aimem_cli.managed import run

    repo = tmp_path / "wsrepo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "master")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    wt = tmp_path / "wsrepo-wt2"
    _git(repo, "worktree", "add", "-q", "-b", "wsrepo-wt2", str(wt))
    (repo / "sub").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{_stub_bin(tmp_path, 'claude')}:{os.environ['PATH']}", "HOME": str(home)}
    for cwd, root, branch in ((wt, wt, "wsrepo-wt2"), (repo / "sub", repo, "master"), (repo, repo, "master")):
        with json_server(_lease_ingress) as ing:
            got = run("claude-code", [], cwd=cwd, url=ing.url, token=None, home=home, env=env, wire=False,
                      client_dir=tmp_path / "client")
        assert got.exit_code == 0
        opened = next(b for p, b in _bodies(ing) if p == "/hook/workstream/lease" and b["action"] == "open")
        assert opened["checkout_root"] == os.path.realpath(root), cwd
        events = [e for p, b in _bodies(ing) if p == "/hook/workstream/append" for e in b["events"]]
        assert [e["role"] for e in events] == ["checkpoint"]
        assert f"branch {branch}, HEAD" in events[0]["text"], cwd


def test_run_and_import_find_the_ingress_of_the_running_stack(tmp_path, monkeypatch) -> None:
    """``aimem run`` and ``aimem import`` post to the ingress of the ``aimem up`` running on the
    data dir (its ``run/up.json``), like the query commands; an explicit URL still wins."""
    import subprocess
    import sys

    import time

    from aimem_cli.hookconfig import DEFAULT_URL, client_settings
    from aimem_common.runstate import is_supervisor

    for k in ("AIMEM_INGRESS_URL", "AIMEM_AUTH__TOKEN", "AIMEM_PORT_BASE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AIMEM_DATA_DIR", str(tmp_path))
    assert client_settings()[1]["url"] == DEFAULT_URL  # nothing runs there
    sup = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "aimem", "up"])
    try:
        deadline = time.monotonic() + 10  # a busy machine: wait until the child has exec'd
        while not is_supervisor(sup.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "up.json").write_text(json.dumps({"pid": sup.pid, "port_base": 19701}))
        assert client_settings()[1]["url"] == "http://127.0.0.1:19701"
        monkeypatch.setenv("AIMEM_INGRESS_URL", "http://127.0.0.1:9")
        assert client_settings()[1]["url"] == "http://127.0.0.1:9"
    finally:
        sup.kill()
        sup.wait(10)
    monkeypatch.delenv("AIMEM_INGRESS_URL")
    assert client_settings()[1]["url"] == DEFAULT_URL  # its supervisor is gone: the record is ignored


def test_a_harness_that_is_not_installed_fails_before_the_lease_is_opened(tmp_path, json_server) -> None:
    """Nothing reaches the server: no workstream is created and the missing harness is not
    recorded as the workstream's (a later bare ``aimem run`` would otherwise pick it)."""
    from aimem_cli.managed import RunError, run

    env = {"PATH": str(_stub_bin(tmp_path, "claude")), "HOME": str(tmp_path)}
    with json_server(_lease_ingress) as ing:
        with pytest.raises(RunError, match=r"^gemini \(gemini-cli\) is not on PATH$"):
            run("gemini-cli", [], cwd=tmp_path, url=ing.url, token=None, home=tmp_path, env=env,
                client_dir=tmp_path / "client")
    assert ing.requests == []
