"""The admin API and the operator CLI against real processes (nats-server, writer, query).

Covers: backup → restore round trip on a populated store, purge previews equal confirmed
counts, rename/move failure codes, audit rows, the /admin auth matrix, bad input.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

pytestmark = pytest.mark.integration

ROOT_TOKEN = "root-token-for-tests"


@pytest.fixture
def stack2(settings, services):
    """writer + query with a root token; returns (query_url, cli(*args) -> Result)."""
    settings.auth.token = ROOT_TOKEN
    procs = services("writer", "query")
    url = procs["query"].url
    runner = CliRunner()
    app = build_app()
    env = {"AIMEM_SERVER_URL": url, "AIMEM_AUTH__TOKEN": ROOT_TOKEN, "AIMEM_DATA_DIR": str(settings.data_dir),
           "AIMEM_PORT_BASE": str(settings.port_base), "AIMEM_BUS__NATS_URL": settings.bus.nats_url}

    def cli(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), env=env, input=input)

    return url, cli, procs


def api(url: str, method: str, path: str, token: str | None = ROOT_TOKEN, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, url + path, headers=headers, timeout=30, **kw)


def write(cli, project: str, path: str, body: str) -> None:
    r = cli("write-page", path, "-p", project, input=body)
    assert r.exit_code == 0, r.output


def wait_checkpoint(url: str, n: int, timeout_s: float = 10) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        items = api(url, "GET", "/admin/checkpoints", params={"limit": 100}).json()["checkpoints"]
        if len(items) >= n or time.monotonic() > deadline:
            return items
        time.sleep(0.2)


PAGES = {
    "decisions/0001.md": "# Use NATS JetStream\nWorkQueue retention; the writer acks after commit.",
    "gotchas/sqlite-wal.md": "# SQLite WAL needs one host\nAll processes must share the volume on one node.",
    "procedures/release.md": "# Release\nTag, build the image, push the chart. See [[decisions/0001.md]].",
}


def snapshot(url: str) -> dict:
    out = {}
    for path in PAGES:
        r = api(url, "GET", "/api/v1/workspaces/default/projects/app/page", params={"path": path})
        assert r.status_code == 200, r.text
        page = r.json()
        out[path] = (page["title"], page["body"])
    for q in ("jetstream retention", "sqlite volume", "release chart"):
        hits = api(url, "GET", "/api/v1/search", params={"q": q, "workspace": "default", "project": "app"}).json()
        out[q] = [h["path"] for h in hits["hits"]]
    out["git"] = [c["oid"] for c in api(url, "GET", "/admin/checkpoints", params={"limit": 100}).json()["checkpoints"]]
    return out


def test_backup_restore_round_trip(stack2, settings, services, tmp_path: Path) -> None:
    url, cli, procs = stack2
    for path, body in PAGES.items():
        write(cli, "app", path, body)
    write(cli, "app", "decisions/0001.md", PAGES["decisions/0001.md"] + "\nRevised.")
    assert wait_checkpoint(url, 1)
    archive = tmp_path / "b.tar.gz"
    r = cli("backup", "--to", str(archive))
    assert r.exit_code == 0, r.output
    assert archive.stat().st_mode & 0o777 == 0o600  # it holds the whole store: owner-only
    # The backup first has the writer commit its pending checkpoint: the store as backed up.
    before = snapshot(url)
    assert before["jetstream retention"] and before["git"]
    # restore refuses while the stack runs
    r = cli("restore", "--from", str(archive), "--force")
    assert r.exit_code == 1 and "stop it before restoring" in r.output
    # damage the live store, stop, restore, start again
    write(cli, "app", "notes/after-backup.md", "# Later\nwritten after the backup")
    # a page changed after the backup: the text index holds this version, the backup the older one
    write(cli, "app", "decisions/0001.md", "# Use NATS JetStream\nRewritten after the backup: okapi.")
    for p in reversed(list(procs.values())):
        p.stop()
    r = cli("restore", "--from", str(archive))
    assert r.exit_code == 1 and "not empty" in r.output
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    r = cli("restore", "--from", str(bad), "--force")
    assert r.exit_code == 1 and "aimem:" in r.output
    r = cli("restore", "--from", str(archive), "--force")
    assert r.exit_code == 0, r.output
    assert not list(settings.data_dir.glob(".restore-*"))
    procs = services("writer", "query")
    url = procs["query"].url
    after = snapshot(url)
    assert after == before
    hits = api(url, "GET", "/api/v1/search", params={"q": "okapi", "workspace": "default", "project": "app"}).json()
    assert hits["hits"] == []
    r = api(url, "GET", "/api/v1/workspaces/default/projects/app/page", params={"path": "notes/after-backup.md"})
    assert r.status_code == 404


def test_purge_preview_matches_confirmed_and_audits(stack2) -> None:
    url, cli, _ = stack2
    for path, body in PAGES.items():
        write(cli, "scratch", path, body)
    r = cli("purge-project", "-p", "scratch")
    assert r.exit_code == 1
    assert "Would purge default/scratch: 3 pages" in r.output and "--confirm" in r.output
    preview = api(url, "POST", "/admin/purge-project", json={"project": "scratch", "dry_run": True,
                                                             "confirm": True}).json()
    assert preview["dry_run"] is True
    r = api(url, "POST", "/admin/purge-project", json={"project": "scratch"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "confirm_required"
    r = cli("purge-project", "-p", "scratch", "--confirm", "--json")
    assert r.exit_code == 0, r.output
    done = json.loads(r.output)
    for k, v in preview.items():
        if k.endswith(("_deleted", "_denulled")) and k != "files_deleted":
            assert done[k] == v, k
    r = cli("purge-project", "-p", "scratch", "--confirm")
    assert r.exit_code == 1 and "not found" in r.output
    audit = api(url, "GET", "/admin/audit", params={"op": "project.purge"}).json()["audit"]
    assert len(audit) == 1 and audit[0]["actor"] == "root" and audit[0]["detail"]["pages_deleted"] == 3


def path_checkpoints(cli, project: str, path: str, n: int, timeout_s: float = 15) -> list[str]:
    """Short ids of the checkpoints that touched ``project/path`` once there are ≥ ``n``
    (git checkpoints are debounced, so a write is not in git the moment it is applied)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = cli("checkpoints", "--json", "-p", project, "--path", path)
        assert r.exit_code == 0, r.output
        revs = [c["short"] for c in json.loads(r.output)["checkpoints"]]
        if len(revs) >= n or time.monotonic() > deadline:
            return revs
        time.sleep(0.2)


def test_rename_move_restore_failure_codes(stack2) -> None:
    url, cli, _ = stack2
    write(cli, "app", "notes/a.md", "# A\none")
    write(cli, "web", "notes/a.md", "# A\nweb")
    assert len(path_checkpoints(cli, "web", "notes/a.md", 1)) == 1  # v1 is in git before v2 is written
    cases = [
        ("/admin/rename-project", {"from": "nope", "to": "x"}, 404),
        ("/admin/rename-project", {"from": "app", "to": "web"}, 422),
        ("/admin/rename-project", {"from": "app", "to": "bad/name"}, 422),
        ("/admin/rename-workspace", {"from": "nope", "to": "x"}, 404),
        ("/admin/move-project", {"project": "app", "to_workspace": "lab"}, 400),
        ("/admin/move-project", {"project": "app", "to_workspace": "default", "confirm": True}, 422),
        ("/admin/move-project", {"project": "nope", "to_workspace": "lab", "confirm": True}, 404),
        ("/admin/move-session", {"project": "app"}, 400),
        ("/admin/move-session", {"session_id": "nope", "project": "app"}, 404),
        ("/admin/purge-session", {"project": "app", "session_id": "nope", "dry_run": True}, 404),
        ("/admin/restore-page", {"project": "app", "path": "../x.md", "from": "abcdef12"}, 400),
        ("/admin/restore-page", {"project": "app", "path": "notes/a.md", "from": "abcdef12"}, 500),
        ("/admin/purge-project", {"project": "app", "confirm": True, "bogus": 1}, 400),
    ]
    for path, body, status in cases:
        r = api(url, "POST", path, json=body)
        assert r.status_code == status, (path, body, r.text)
        assert set(r.json()) == {"error"} and r.json()["error"]["code"]
    r = cli("rename-project", "--from", "app", "--to", "app2")
    assert r.exit_code == 0, r.output
    r = cli("move-project", "-p", "app2", "--to-workspace", "lab")
    assert r.exit_code == 1 and "Would move default/app2 to lab via true-move" in r.output
    r = cli("move-project", "-p", "app2", "--to-workspace", "lab", "--confirm")
    assert r.exit_code == 0 and "true-move" in r.output
    r = cli("read-page", "notes/a.md", "-w", "lab", "-p", "app2", "--json")
    assert r.exit_code == 0 and "one" in json.loads(r.output)["body"]
    # restore-page from a checkpoint, found through `checkpoints --json`
    write(cli, "web", "notes/a.md", "# A\nweb v2")
    revs = path_checkpoints(cli, "web", "notes/a.md", 2)
    assert len(revs) == 2  # newest first: v2, then v1
    r = cli("restore-page", "-p", "web", "--path", "notes/a.md", "--from", revs[-1])
    assert r.exit_code == 0, r.output
    r = cli("read-page", "notes/a.md", "-p", "web", "--json")
    assert json.loads(r.output)["body"].strip().endswith("web")
    ops = {a["op"] for a in api(url, "GET", "/admin/audit", params={"limit": 100}).json()["audit"]}
    assert {"project.rename", "project.move", "page.restore"} <= ops


def test_admin_auth_matrix(stack2) -> None:
    url, cli, _ = stack2
    r = cli("user", "create", "alice")
    assert r.exit_code == 0, r.output
    r = cli("api-key", "create", "alice", "--json")
    assert r.exit_code == 0, r.output
    alice_key = json.loads(r.output)["key"]
    assert cli("user", "grant", "alice", "-p", "app", "--write").exit_code == 0
    paths = api(url, "GET", "/openapi.json").json()["paths"]
    admin = [(p, m) for p, ops in paths.items() if p.startswith("/admin") for m in ops]
    assert len(admin) >= 15
    for path, method in admin:
        concrete = path.replace("{name}", "alice").replace("{key_id}", "1").replace("{proposal_id}", "1")
        for token, status in ((None, 401), ("wrong", 401), (alice_key, 403)):
            r = api(url, method.upper(), concrete, token=token)
            assert r.status_code == status, (method, path, token, r.text)
        if method == "get":
            r = api(url, "GET", concrete)
            assert r.status_code == (404 if "{" in path else 200), (path, r.text)
    r = cli("user", "list", "--json")
    assert [u["name"] for u in json.loads(r.output)["users"]] == ["alice"]
    r = cli("status", "--token", "wrong")
    assert r.exit_code == 1 and r.output.startswith("aimem: ") and r.output.count("\n") == 1
    # a user key gets its own projects' figures, not a 403 from the store-wide status
    r = cli("status", "--token", alice_key, "--json")
    assert r.exit_code == 0, r.output
    mine = json.loads(r.output)
    assert mine["data_dir"] is None and isinstance(mine["counts"]["projects"], int)  # the root view names it
    assert cli("status", "--token", alice_key).exit_code == 0


def test_doctor_and_unreachable_server(stack2, settings) -> None:
    url, cli, _ = stack2
    r = cli("doctor", "--json")
    checks = {c["check"]: c["ok"] for c in json.loads(r.output)["checks"]}
    assert checks["writer"] and checks["query"] and checks["nats"] and checks["db"] and checks["git"]
    assert not checks["ingress"] and r.exit_code == 1
    # A stack on another port base (`make up PORT_BASE=...`) with no AIMEM_PORT_BASE here:
    # --server names the query service, and its siblings sit beside it.
    env = {"AIMEM_AUTH__TOKEN": ROOT_TOKEN, "AIMEM_DATA_DIR": str(settings.data_dir), "AIMEM_PORT_BASE": "20000",
           "AIMEM_BUS__NATS_URL": settings.bus.nats_url, "AIMEM_SERVER_URL": "http://127.0.0.1:9"}
    r = CliRunner().invoke(build_app(), ["doctor", "--json", "--server", url], env=env)
    by = {c["check"]: c for c in json.loads(r.output)["checks"]}
    assert by["writer"]["ok"] and by["query"]["ok"], by
    assert by["writer"]["detail"].startswith(f"http://127.0.0.1:{settings.port('writer')}/healthz")
    r = cli("status", "--server", "http://127.0.0.1:9")
    assert r.exit_code == 1 and "cannot reach" in r.output


def test_search_explain_shows_each_streams_rank(stack2) -> None:
    url, cli, _ = stack2
    write(cli, "app", "gotchas/ledger.md", "# Ledger reconcile\nreconcile_ledger_v2 fails when the ledger is empty.")
    write(cli, "app", "notes/ledger.md", "# Ledger notes\nThe ledger is reconciled nightly.")
    deadline = time.monotonic() + 10
    while True:
        r = cli("search", "reconcile_ledger_v2", "-p", "app", "--explain", "--json")
        assert r.exit_code == 0, r.output
        data = json.loads(r.output)
        if data["hits"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    top = data["hits"][0]
    assert top["path"] == "gotchas/ledger.md"
    streams = top["score_details"]["streams"]
    human = cli("search", "reconcile_ledger_v2", "-p", "app", "--explain")
    assert human.exit_code == 0, human.output
    first_line, header, row = human.output.splitlines()[:3]
    assert first_line.startswith("streams run: ") and all(s in first_line for s in data["streams_active"])
    assert "STREAMS" in header and row.split()[2] == "gotchas/ledger.md"
    best = min(streams.items(), key=lambda kv: kv[1]["rank"])
    assert f"{best[0]}#{best[1]['rank']}" in row  # each stream's rank, as the API gives it
    plain = cli("search", "reconcile_ledger_v2", "-p", "app")
    assert "STREAMS" not in plain.output and "streams run" not in plain.output


def test_purge_workspace_purges_and_lifts(stack2) -> None:
    """purge-workspace previews, purges every project, leaves a tombstone `aimem purges` shows;
    --forget-tombstone lifts it."""
    url, cli, _ = stack2
    write(cli, "api", "notes/a.md", "alpha")
    r = cli("write-page", "notes/b.md", "-p", "web", "-w", "team", input="beta")
    assert r.exit_code == 0, r.output
    r = cli("purge-workspace", "--workspace", "team")
    assert r.exit_code == 1 and "Would purge workspace team: 1 projects, 1 pages" in r.output
    r = cli("purge-workspace", "--workspace", "team", "--confirm", "--json")
    assert r.exit_code == 0, r.output
    done = json.loads(r.output)
    assert done["projects_deleted"] == 1 and done["pages_deleted"] == 1 and done["tombstone_id"]
    r = cli("purges", "--json")
    listed = json.loads(r.output)
    assert [(t["kind"], t["workspace"], t["project"]) for t in listed["purges"]] == [
        ("project", "team", "web"), ("workspace", "team", None)]
    assert listed["summary"]["live"] == {"project": 1, "workspace": 1}
    assert api(url, "GET", "/admin/status").json()["purges"]["live"] == {"project": 1, "workspace": 1}
    r = cli("purges")
    assert "workspace team" in r.output and "1 pages" in r.output and "refused since: 0" in r.output
    r = cli("purge-workspace", "--workspace", "team", "--forget-tombstone", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["lifted"] == [done["tombstone_id"]]
    assert api(url, "POST", "/admin/purges/lift", json={"session_id": "x", "project": "y"}).status_code in (400, 422)
    r = api(url, "POST", "/admin/purges/lift", json={"session_id": "never"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_tombstone"
    assert api(url, "GET", "/api/v1/search", params={"q": "alpha", "project": "api"}).status_code == 200


def test_user_delete_previews_what_goes_and_needs_confirm(stack2) -> None:
    url, cli, _ = stack2
    for args in (("user", "create", "bob"), ("user", "grant", "bob", "-w", "default", "-p", "*"),
                 ("profile", "add", "Bob wants short answers.", "--user", "bob")):
        r = cli(*args)
        assert r.exit_code == 0, r.output
    r = cli("user", "delete", "bob")
    assert r.exit_code == 1
    assert "Would delete user bob: 0 active API keys, 1 grants, 1 profile entries." in r.output
    assert "re-run with --confirm" in r.output
    assert any(u["name"] == "bob" for u in api(url, "GET", "/admin/users").json()["users"])  # the preview kept bob
    r = cli("user", "delete", "bob", "--confirm")
    assert r.exit_code == 0 and "deleted user bob" in r.output, r.output
    assert not any(u["name"] == "bob" for u in api(url, "GET", "/admin/users").json()["users"])
    r = cli("user", "delete", "bob", "--confirm")
    assert r.exit_code == 1 and r.output.strip() == "aimem: no user named 'bob'", r.output


def test_profile_add_refuses_a_user_who_holds_no_profile(stack2) -> None:
    url, cli, _ = stack2
    assert cli("user", "create", "nogrant").exit_code == 0
    r = cli("profile", "add", "Never seen.", "--user", "nogrant")
    assert r.exit_code == 1 and "nogrant has no grant, so no profile memory" in r.output, r.output
    assert api(url, "GET", "/admin/profile", params={"user": "nogrant"}).json()["count"] == 0
    assert cli("user", "grant", "nogrant", "-w", "default", "-p", "*").exit_code == 0
    r = cli("profile", "add", "Now seen.", "--user", "nogrant")
    assert r.exit_code == 0 and "added entry" in r.output, r.output
