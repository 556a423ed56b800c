"""``aimem`` workstream commands against a small stand-in query/admin server (stdlib HTTP on
loopback): what they refuse before asking, and what they print after a run."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

WID = "b54b" + "0" * 28


class OneWorkstream:
    """Answers ``GET …/workstreams`` with one workstream and records every request."""

    def __init__(self):
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: object) -> None:
                out = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):  # noqa: N802
                outer.requests.append(("GET", self.path))
                self._answer([{"id": WID, "name": "wsrepo", "checkout_root": "/nowhere", "harnesses": [],
                               "live_run": None, "events": 11}])

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.requests.append(("POST", self.path))
                self._answer({"dry_run": False, "name": "wsrepo", "workstream_id": WID,
                              "workstream_events_deleted": 11, "managed_runs_deleted": 3})

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def one_workstream():
    with OneWorkstream() as s:
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
    assert ("POST", "/admin/workstream-delete") in one_workstream.requests


class LeaseIngress:
    """Stands in for ingress's ``/hook/workstream/*`` routes: records every body it gets."""

    def __init__(self, appended: int = 1):
        self.bodies: list[tuple[str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                path = self.path.split("?", 1)[0]
                outer.bodies.append((path, body))
                if path == "/hook/workstream/lease":
                    ws = {"id": WID, "name": "wt", "checkout_root": body.get("checkout_root") or ""}
                    out = {"run": {"harness": body.get("harness") or "claude-code", "workstream": ws,
                                   "started_at": "2026-01-01T00:00:00Z",
                                   "resume_session_id": None}}
                else:
                    out = {"appended": outer.appended if path == "/hook/workstream/append" else 0}
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.appended = appended
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


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


def test_a_run_in_a_linked_worktree_keeps_its_own_workstream_and_checkpoint(tmp_path) -> None:
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
        with LeaseIngress() as ing:
            got = run("claude-code", [], cwd=cwd, url=ing.url, token=None, home=home, env=env, wire=False,
                      client_dir=tmp_path / "client")
        assert got.exit_code == 0
        opened = next(b for p, b in ing.bodies if p == "/hook/workstream/lease" and b["action"] == "open")
        assert opened["checkout_root"] == os.path.realpath(root), cwd
        events = [e for p, b in ing.bodies if p == "/hook/workstream/append" for e in b["events"]]
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


def test_a_harness_that_is_not_installed_fails_before_the_lease_is_opened(tmp_path) -> None:
    """Nothing reaches the server: no workstream is created and the missing harness is not
    recorded as the workstream's (a later bare ``aimem run`` would otherwise pick it)."""
    from aimem_cli.managed import RunError, run

    env = {"PATH": str(_stub_bin(tmp_path, "claude")), "HOME": str(tmp_path)}
    with LeaseIngress() as ing:
        with pytest.raises(RunError, match=r"^gemini \(gemini-cli\) is not on PATH$"):
            run("gemini-cli", [], cwd=tmp_path, url=ing.url, token=None, home=tmp_path, env=env,
                client_dir=tmp_path / "client")
    assert ing.bodies == []
