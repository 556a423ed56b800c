"""``aimem up`` on ports another process holds: one line naming the port, exit 1, nothing
started; and the health wait counts only this run's services (their ``/healthz`` instance id)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimem_common import config
from aimem_common.natsserver import free_port, wait_port

AIMEM = Path(sys.executable).with_name("aimem")

# Another stack's service: answers every GET with 200 {"status": "ok"} (as an older or foreign
# stack's /healthz does), in its own process.
OTHER_STACK = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        out = json.dumps({"status": "ok", "service": "ingress", "instance": sys.argv[2]}).encode()
        self.send_response(200); self.send_header("content-length", str(len(out))); self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.fixture
def other_stack():
    """Start a foreign /healthz server on a port; yields a starter, stops them all after."""
    procs = []

    def start(port: int, instance: str = "theirs") -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", OTHER_STACK, str(port), instance])
        procs.append(proc)
        assert wait_port("127.0.0.1", port, 10), "the foreign server did not listen"
        return proc

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def run_up(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    return subprocess.run([str(AIMEM), "up", "--data-dir", str(data_dir), *args, "--health-timeout", "20"],
                          env=env, capture_output=True, text=True, timeout=60)


def test_a_taken_service_port_is_named_and_nothing_starts(tmp_path, other_stack):
    base, nats_port = free_port(count=5), free_port()
    other_stack(base + 2)  # the mcp-gateway's port (offset 2)
    res = run_up(tmp_path / "d", "--port-base", str(base), "--nats-port", str(nats_port))
    assert res.returncode == 1, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("aimem up:")]
    assert errors == [f"aimem up: port {base + 2} (mcp-gateway) on 127.0.0.1 already in use by another process "
                      "(another stack?): stop it, or choose other ports (--port-base N, --nats-port N)"]
    assert "healthy" not in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "d" / "nats").exists()  # nats-server never started
    assert not wait_port("127.0.0.1", nats_port, 0.2)


def test_a_taken_nats_port_is_named_and_nothing_starts(tmp_path, other_stack):
    base, nats_port = free_port(count=5), free_port()
    other_stack(nats_port)
    res = run_up(tmp_path / "d", "--port-base", str(base), "--nats-port", str(nats_port))
    assert res.returncode == 1, res.stderr
    assert f"aimem up: NATS client port {nats_port} on 127.0.0.1 already in use" in res.stderr
    assert "healthy" not in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "d" / "nats").exists()
    assert not wait_port("127.0.0.1", base, 0.2)  # no service started either


def test_the_health_wait_ignores_a_service_that_is_not_ours(tmp_path, other_stack):
    """A 200 from another process on the port (which took it after the port check) is not
    "healthy": only a /healthz carrying this run's instance id counts."""
    from aimem_cli.commands.up import Supervisor

    base = free_port(count=5)
    settings = config.load(tmp_path / "d", port_base=base)
    sup = Supervisor(settings, [], env={}, log_dir=None, services=["ingress"])
    sup.children[0].next_start = float("inf")  # never spawn our own ingress here: only the wait is tested
    foreign = other_stack(base)
    t0 = time.monotonic()
    assert sup.wait_healthy(1.5) is False
    assert time.monotonic() - t0 >= 1.4
    foreign.terminate()
    foreign.wait(10)
    other_stack(base, instance=sup.instance)
    assert sup.wait_healthy(5) is True  # the same answer with our id counts
