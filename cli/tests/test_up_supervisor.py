"""``aimem up``'s supervisor brings a dead nats-server back on the same port and store."""

from __future__ import annotations

import time

from aimem_cli.commands.up import Supervisor
from aimem_common import config
from aimem_common.natsserver import NatsServer, free_port, wait_port


def test_a_killed_nats_server_is_restarted_with_its_store(data_dir):
    settings = config.load(data_dir, environ={})
    sup = Supervisor(settings, [NatsServer(settings.data_dir / "nats", port=free_port())], env={}, log_dir=None)
    sup.children = []  # NATS only: the services have their own tests
    sup.start()
    try:
        first = sup.nats.proc
        (sup.nats.store_dir / "marker").write_text("kept")
        first.kill()
        first.wait(5)
        assert not wait_port(sup.nats.host, sup.nats.port, 0.2)
        deadline = time.monotonic() + 15
        while sup.nats.proc is first and time.monotonic() < deadline:
            sup.reap()
            time.sleep(0.1)
        assert sup.nats.proc is not first and sup.nats.proc.poll() is None
        assert wait_port(sup.nats.host, sup.nats.port, 5)
        assert sup.nats_states[0].restarts == 1 and (sup.nats.store_dir / "marker").read_text() == "kept"
    finally:
        sup.stop()
    assert sup.nats.proc.poll() is not None


def test_a_nats_port_already_in_use_is_refused(tmp_path):
    """Another stack's nats-server on the port must not be mistaken for ours."""
    import pytest

    from aimem_common.natsserver import NatsServer

    with NatsServer(tmp_path / "theirs") as theirs:
        ours = NatsServer(tmp_path / "ours", port=theirs.port)
        with pytest.raises(RuntimeError, match="already in use"):
            ours.start()
        assert ours.proc is None and theirs.proc.poll() is None


def test_a_two_server_cluster_is_refused(tmp_path):
    """Two JetStream servers cannot elect a leader once one is lost: refuse, start nothing."""
    from typer.testing import CliRunner

    from aimem_cli.main import build_app

    res = CliRunner().invoke(build_app(), ["up", "--data-dir", str(tmp_path / "d"), "--nats-cluster", "2"])
    assert res.exit_code == 2 and "at least 3" in res.output
    assert not (tmp_path / "d" / "nats").exists()


def test_only_store_errors_on_the_monitoring_port_count(data_dir):
    """A cluster member that is electing is red on /healthz but must not be restarted."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = {"status": 503, "body": {}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # nats-server's /healthz shape: {"status": "unavailable", "error": "..."}
            body = json.dumps(answer["body"]).encode()
            self.send_response(answer["status"])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = config.load(data_dir, environ={})
        node = NatsServer(settings.data_dir / "nats", monitor_port=server.server_address[1])
        sup = Supervisor(settings, [node], env={}, log_dir=None)
        for electing in ("JetStream is not current with the meta leader",
                         "JetStream has not established contact with a meta leader"):
            answer["body"] = {"status": "unavailable", "error": electing}
            assert sup.probe_nats(node) is None
        full = ("JetStream stream '$G > AIMEM_MUT' write error: write /d/nats/jetstream/$G/streams/AIMEM_MUT/"
                "msgs/1.blk: no space left on device")
        answer["body"] = {"status": "unavailable", "error": full}
        assert sup.probe_nats(node) == full
        answer.update(status=200, body={"status": "ok"})
        assert sup.probe_nats(node) is None
    finally:
        server.shutdown()
        server.server_close()
