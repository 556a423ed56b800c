"""admission.admit against real loopback webhooks: order, refusals, failure policies."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aimem_common import admission, config
from aimem_common.errors import AdmissionRefusedError
from aimem_common.telemetry import Telemetry


class Hook:
    """Answers ``answer`` (bytes) with ``status`` after ``delay_s``; records bodies."""

    def __init__(self, answer: object = None, status: int = 200, delay_s: float = 0.0):
        self.answer, self.status, self.delay_s, self.calls = answer, status, delay_s, []
        hook = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                hook.calls.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                time.sleep(hook.delay_s)
                data = hook.answer if isinstance(hook.answer, bytes) else json.dumps(hook.answer).encode()
                self.send_response(hook.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


def settings(tmp_path, *hooks: dict):
    return config.load(tmp_path, environ={}, admission={"webhooks": list(hooks)})


async def admit(s, op="page.delete", payload=None, telemetry=None):
    await admission.admit(s, op, payload if payload is not None else {"path": "a.md"}, workspace="w",
                          project="p", actor="alice", telemetry=telemetry)


@pytest.mark.asyncio
async def test_order_first_refusal_wins_and_unlisted_ops_and_dry_runs_are_not_asked(tmp_path):
    ok, no, later = Hook({"allowed": True}), Hook({"allowed": False, "reason": "frozen"}), Hook({"allowed": True})
    try:
        s = settings(tmp_path, {"url": ok.url}, {"url": no.url, "operations": ["delete_page"]}, {"url": later.url})
        with pytest.raises(AdmissionRefusedError) as info:
            await admit(s)
        assert info.value.message == "frozen" and info.value.status == 409
        assert info.value.envelope()["error"]["code"] == "admission_refused"
        assert len(ok.calls) == 1 and len(no.calls) == 1 and later.calls == []
        assert ok.calls[0]["operation"] == "delete_page" and ok.calls[0]["actor"] == "alice"
        await admit(s, "project.purge", {"force": True})  # `no` does not list purge_project
        assert [len(ok.calls), len(no.calls), len(later.calls)] == [2, 1, 1]
        await admit(s, "session.purge", {"session_id": "x", "dry_run": True})
        await admit(s, "page.write", {"path": "a.md"})
        assert [len(ok.calls), len(no.calls), len(later.calls)] == [2, 1, 1]
    finally:
        for h in (ok, no, later):
            h.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["dead", "slow", "500", "not_json", "no_allowed"])
async def test_failures_follow_the_policy(tmp_path, kind):
    hook = None
    if kind == "dead":
        url = dead_url()
    else:
        hook = {"slow": Hook({"allowed": True}, delay_s=2.0), "500": Hook({"allowed": True}, status=500),
                "not_json": Hook(b"<html>"), "no_allowed": Hook({"ok": True})}[kind]
        url = hook.url
    try:
        tel = Telemetry("t")
        with pytest.raises(AdmissionRefusedError) as info:
            await admit(settings(tmp_path, {"url": url, "timeout_s": 0.5}), telemetry=tel)
        assert info.value.data["failure"] is True
        await admit(settings(tmp_path, {"url": url, "timeout_s": 0.5, "on_failure": "allow"}), telemetry=tel)
        text = tel.render()[0].decode()
        assert 'aimem_admission_failures_total{operation="delete_page",policy="allow"} 1.0' in text
        assert 'aimem_admission_failures_total{operation="delete_page",policy="reject"} 1.0' in text
    finally:
        if hook:
            hook.close()


def test_config_refuses_an_unknown_operation(tmp_path):
    with pytest.raises(config.ConfigError):
        settings(tmp_path, {"url": "http://x/", "operations": ["delete_everything"]})
