"""[[mirrors]] end to end: real writer + maintainer, a loopback receiver that is down for a
while gets every change once after it returns, signed, in commit order."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from aimem_common import maint_rpc
from aimem_common.commands import make_envelope
from aimem_testing.probe import wait_for_async

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

SECRET = "mirror-s3cret"


class Receiver:
    """A mirror receiver that can go down and come back on the same port. It records every
    raw delivery and dedupes by ``X-Aimem-Event-Id`` as a real receiver should."""

    def __init__(self) -> None:
        self.raw: list[tuple[dict, dict]] = []
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.up()

    def up(self) -> None:
        recv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recv.raw.append(({k.lower(): v for k, v in self.headers.items()}, {"bytes": body,
                                                                                   **json.loads(body)}))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook?token=abc"

    def unique(self) -> list[dict]:
        seen, out = set(), []
        for _, body in self.raw:
            if body["id"] not in seen:
                seen.add(body["id"])
                out.append(body)
        return out


def wait_for(fn, timeout_s: float = 30.0, what: str = "condition"):
    """``aimem_testing.probe.wait_for_async`` (await it) with this module's 30 s default."""
    return wait_for_async(fn, timeout_s, what)


async def write(bus, path: str, body: str) -> None:
    await bus.request(make_envelope("page.write", {"path": path, "body": body}, workspace="default", project="mir"))


async def test_a_receiver_down_for_a_while_gets_every_change_once_after_it_returns(settings, services, bus):
    recv = Receiver()
    try:
        (settings.data_dir / "config.toml").write_text(f"""
[[mirrors]]
name = "audit"
url = "{recv.url}"
secret = "{SECRET}"
events = ["page.changed", "*.purged"]
timeout_s = 2
max_backoff_s = 2
""")
        procs = services("writer", "maintainer", "query")
        await write(bus, "notes/a.md", "first")
        await wait_for(lambda: len(recv.unique()) == 1, what="the first notification")

        recv.down()
        await write(bus, "notes/b.md", "second")
        await write(bus, "notes/c.md", "third")
        await bus.request(make_envelope("page.delete", {"path": "notes/a.md"}, workspace="default", project="mir"))

        async def failing():
            st = await maint_rpc.call(bus.nc, "status", workspace="default", project=None, actor="t", args={})
            return st["mirrors"][0]["consecutive_failures"] >= 2 and st["mirrors"][0]
        deadline = time.monotonic() + 20
        while not (st := await failing()):
            assert time.monotonic() < deadline, "no failure reported in status"
            await asyncio.sleep(0.2)
        assert st["name"] == "mirror-audit" and st["last_error"] == "ConnectError" and st["pending"] >= 1
        assert "token" not in json.dumps(st) and SECRET not in json.dumps(st)
        admin = httpx.get(procs["query"].url + "/admin/status", timeout=10).json()
        assert admin["mirrors"][0]["name"] == "mirror-audit" and admin["mirrors"][0]["consecutive_failures"] >= 2
        metrics = httpx.get(procs["maintainer"].url + "/metrics").text
        assert 'aimem_mirror_deliveries_total{mirror="mirror-audit",outcome="failed"}' in metrics

        recv.up()
        await wait_for(lambda: len(recv.unique()) == 4, what="every change after the receiver returned")
        await asyncio.sleep(2.5)  # anything left to (re)send would arrive by now
        got = recv.unique()
        assert len(recv.raw) == len(got) == 4  # once each (no duplicate in this run; ids dedupe if any)
        assert [(b["kind"], b["data"]["path"], b["data"]["action"]) for b in got] == [
            ("page.changed", "notes/a.md", "written"), ("page.changed", "notes/b.md", "written"),
            ("page.changed", "notes/c.md", "written"), ("page.changed", "notes/a.md", "deleted")]
        seqs = [int(b["id"].removeprefix("evt-")) for b in got]
        assert seqs == sorted(seqs)  # commit order
        for headers, body in recv.raw:
            expected = "sha256=" + hmac.new(SECRET.encode(), body["bytes"], hashlib.sha256).hexdigest()
            assert headers["x-aimem-signature"] == expected and headers["x-aimem-event-id"] == body["id"]
            assert body["project"] == "mir"
        st = await maint_rpc.call(bus.nc, "status", workspace="default", project=None, actor="t", args={})
        assert st["mirrors"][0]["consecutive_failures"] == 0 and st["mirrors"][0]["delivered"] == 4
    finally:
        if recv.server:
            recv.down()
