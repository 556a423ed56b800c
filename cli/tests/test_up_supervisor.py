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
