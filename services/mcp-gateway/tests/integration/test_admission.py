"""[admission] webhooks in front of destructive operations: a real loopback receiver, real
writer + query + gateway processes. A refusal reaches MCP, the admin API and the web with
the webhook's reason and changes nothing; a dead webhook under ``allow`` is logged and counted."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from mcp import Client

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

APP = {"workspace": "demo", "project": "app"}
REASON = "pages under decisions/ are kept by policy AUD-7"
LEDGERS = f"/api/v1/workspaces/{APP['workspace']}/projects/{APP['project']}/workstreams"
CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


class Receiver:
    """A loopback admission webhook: refuses every operation with ``REASON``."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        recv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recv.calls.append(body)
                data = json.dumps({"allowed": False, "reason": REASON}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/admit"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run the installed ``aimem`` CLI in the test's scope (demo/app)."""
    return subprocess.run([str(Path(sys.executable).with_name("aimem")), *args, "--workspace", APP["workspace"],
                           "--project", APP["project"]], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/admit"


async def test_a_refusing_webhook_blocks_mcp_admin_and_web_deletes(settings, services, h):
    recv = Receiver()
    try:
        (settings.data_dir / "config.toml").write_text(f"""
[[admission.webhooks]]
url = "{recv.url}"
timeout_s = 2
on_failure = "reject"
""")
        procs = services("writer", "query", "mcp-gateway")
        url = h.mcp_url(procs["mcp-gateway"])
        async with Client(url) as c:
            await h.call(c, "memory_write_page", {**APP, "path": "decisions/keep.md", "body": "# Keep\nKept."})
            err = await h.rpc_error(c, "memory_delete_page", {**APP, "path": "decisions/keep.md"})
            assert err.code == -32600 and err.data["code"] == "admission_refused"
            assert REASON in str(err)
        assert recv.calls[0]["operation"] == "delete_page" and recv.calls[0]["payload"]["path"] == "decisions/keep.md"
        assert recv.calls[0]["workspace"] == "demo" and recv.calls[0]["project"] == "app"

        q = procs["query"].url
        with httpx.Client(base_url=q, timeout=30) as http:
            r = http.request("DELETE", "/admin/pages", params={**APP, "path": "decisions/keep.md"})
            assert r.status_code == 409, r.text
            assert r.json()["error"]["code"] == "admission_refused" and r.json()["error"]["message"] == REASON
            r = http.post("/admin/purge-project", json={**APP, "confirm": True, "force": True})
            assert r.status_code == 409 and r.json()["error"]["message"] == REASON
            r = http.post("/admin/purge-session", json={**APP, "session_id": "s1", "confirm": True})
            assert r.status_code == 409 and r.json()["error"]["message"] == REASON
            n = len(recv.calls)
            r = http.post("/admin/purge-project", json={**APP, "dry_run": True})  # a preview is not asked about
            assert r.status_code == 200 and len(recv.calls) == n

            confirm = http.get("/web/p/demo/app/delete/decisions/keep.md")
            assert confirm.status_code == 200, confirm.text[:300]
            r = http.post("/web/p/demo/app/delete/decisions/keep.md",
                          data={"csrf": CSRF_RE.search(confirm.text).group(1)})
            assert r.status_code == 409 and REASON in r.text
        ops = [c["operation"] for c in recv.calls]
        assert ops == ["delete_page", "delete_page", "purge_project", "purge_session", "delete_page"]

        async with Client(url) as c:  # nothing changed
            page = await h.call(c, "memory_read_page", {**APP, "path": "decisions/keep.md"})
            assert "Kept." in page["body"]
    finally:
        recv.close()


async def test_a_dead_webhook_with_allow_lets_the_delete_through_and_is_counted(settings, services, h):
    (settings.data_dir / "config.toml").write_text(f"""
[[admission.webhooks]]
url = "{dead_url()}"
operations = ["delete_page"]
timeout_s = 1
on_failure = "allow"
""")
    procs = services("writer", "mcp-gateway")
    url = h.mcp_url(procs["mcp-gateway"])
    async with Client(url) as c:
        await h.call(c, "memory_write_page", {**APP, "path": "notes/old.md", "body": "old"})
        d = await h.call(c, "memory_delete_page", {**APP, "path": "notes/old.md"})
        assert d["deleted"] is True
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "notes/old.md"})
        assert err.data["code"] == "page_not_found"
    metrics = httpx.get(procs["mcp-gateway"].url + "/metrics").text
    assert 'aimem_admission_failures_total{operation="delete_page",policy="allow"} 1.0' in metrics
    assert 'aimem_admission_decisions_total{decision="allowed",operation="delete_page"} 1.0' in metrics
    log = (settings.data_dir.parent / "logs").glob("mcp-gateway*")
    assert any("admission webhook #0 (delete_page) failed" in p.read_text() for p in log)


async def test_a_refusing_webhook_blocks_a_ledger_delete_and_a_willing_one_lets_it_through(settings, services, bus):
    from aimem_common.commands import make_envelope

    recv = Receiver()
    try:
        (settings.data_dir / "config.toml").write_text(f"""
[[admission.webhooks]]
url = "{recv.url}"
operations = ["delete_ledger"]
on_failure = "reject"
""")
        procs = services("writer", "query")
        run = "d" * 32

        async def op(name: str, payload: dict) -> dict:
            return await bus.request(make_envelope(name, payload, **APP, actor="test"), timeout_s=20)

        opened = await op("workstream.lease", {"action": "open", "run_id": run, "harness": "codex",
                                               "checkout_root": "/w/app"})
        wid = opened["run"]["workstream"]["id"]
        await op("workstream.append", {"run_id": run, "events": [{"role": "user", "text": "ledger kept by policy"}]})
        await op("workstream.lease", {"action": "release", "run_id": run})
        body = {**APP, "workstream_id": wid, "confirm": True}
        with httpx.Client(base_url=procs["query"].url, timeout=30) as http:
            r = http.post("/admin/workstream-delete", json=body)
            assert r.status_code == 409, r.text
            assert (r.json()["error"]["code"], r.json()["error"]["message"]) == ("admission_refused", REASON)
            assert [(c["operation"], c["op"], c["payload"]["workstream_id"]) for c in recv.calls] == [
                ("delete_ledger", "workstream.delete", wid)]
            preview = cli("workstream-delete", wid[:8], "--server", procs["query"].url)  # no --confirm: a preview
            assert preview.returncode == 1 and "Would delete workstream 'app' " in preview.stdout
            assert "1 ledger events, 1 runs" in preview.stdout and "--confirm" in preview.stderr
            assert len(recv.calls) == 1  # a preview is not asked about
            refused = cli("workstream-delete", wid[:8], "--confirm", "--server", procs["query"].url)
            assert refused.returncode == 1 and refused.stderr == f"aimem: {REASON} (HTTP 409)\n", refused.stderr
            assert len(recv.calls) == 2
            assert (settings.data_dir / "raw" / "workstreams" / wid).is_dir()  # nothing changed
            shown = http.get(LEDGERS)
            assert [w["id"] for w in shown.json()] == [wid], shown.text

            (settings.data_dir / "config.toml").write_text(f"""
[[admission.webhooks]]
url = "{recv.url}"
operations = ["delete_page"]
""")  # the ledger is no longer governed; a restarted query service reads it
            procs["query"].stop()
            q = services("query")["query"]
        done = cli("workstream-delete", wid, "--confirm", "--server", q.url)
        assert done.returncode == 0 and done.stdout.startswith("Deleted workstream 'app' "), done.stderr
        assert httpx.get(q.url + LEDGERS).json() == []
        assert len(recv.calls) == 2
        assert not (settings.data_dir / "raw" / "workstreams" / wid).exists()
    finally:
        recv.close()
