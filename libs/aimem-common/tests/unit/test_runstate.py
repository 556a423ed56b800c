"""``aimem_common.runstate`` with real processes: a stale server left by a dead supervisor is
stopped, a reused pid is never touched, one run by a live ``aimem up`` is an error naming it;
a running ``aimem up``'s record gives ``config.load`` its ports (the environment still wins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimem_common import config, runstate

SLEEP = "import time; time.sleep(120)"


def _alive(pid: int) -> bool:
    args = runstate.cmdline(pid)
    return args is not None


def _orphan(*argv: str) -> int:
    """Start ``python -c SLEEP *argv`` through a parent that exits at once (so it is orphaned);
    return its pid once its command line shows ``argv``."""
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', %r, *sys.argv[1:]],"
            " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)") % SLEEP
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True, timeout=30)
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + 10
    while argv[0] not in (runstate.cmdline(pid) or []) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


def test_a_stale_server_of_this_data_dir_is_stopped(tmp_path: Path) -> None:
    conf = str(tmp_path / "db" / "litestream.yml")
    pid = _orphan("litestream", "replicate", "-config", conf)
    try:
        pid_file = tmp_path / "litestream.pid"
        pid_file.write_text(f"{pid}\n")
        note = runstate.stop_stale(pid_file, ["litestream", conf], "litestream")
        assert note == f"stopped a stale litestream (pid {pid}) left by an earlier aimem up of this data dir"
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid) and not pid_file.exists()
        assert runstate.stop_stale(pid_file, ["litestream", conf], "litestream") is None  # nothing left
    finally:
        _kill(pid)


def test_a_reused_pid_is_never_touched(tmp_path: Path) -> None:
    pid = _orphan("something-else")
    try:
        pid_file = tmp_path / "nats.pid"
        pid_file.write_text(str(pid))
        assert runstate.stop_stale(pid_file, ["nats-server", str(tmp_path / "nats")], "nats-server") is None
        assert _alive(pid) and not pid_file.exists()
    finally:
        _kill(pid)


def test_a_server_of_a_live_aimem_up_is_an_error_naming_it(tmp_path: Path) -> None:
    store = str(tmp_path / "nats")
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', %r, 'nats-server', '-sd', %r]);"
            " print(p.pid, flush=True); time.sleep(120)") % (SLEEP, store)
    sup = subprocess.Popen([sys.executable, "-c", code, "aimem", "up"], stdout=subprocess.PIPE, text=True)
    child = int(sup.stdout.readline())
    try:
        deadline = time.monotonic() + 10  # a busy machine: wait until the child has exec'd
        while "nats-server" not in (runstate.cmdline(child) or []) and time.monotonic() < deadline:
            time.sleep(0.05)
        (tmp_path / "nats.pid").write_text(str(child))
        with pytest.raises(RuntimeError, match=f"run by another aimem up \\(pid {sup.pid}\\).*kill {sup.pid}"):
            runstate.stop_stale(tmp_path / "nats.pid", ["nats-server", store], "nats-server")
        assert _alive(child)

        # Its record gives clients of the data dir the ports it runs on; the environment wins.
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "up.json").write_text(json.dumps(
            {"pid": sup.pid, "port_base": 19100, "nats_url": "nats://127.0.0.1:19199"}))
        s = config.load(tmp_path, environ={})
        assert (s.port_base, s.bus.nats_url, s.ingress_url) == (19100, "nats://127.0.0.1:19199", "http://127.0.0.1:19100")
        s = config.load(tmp_path, environ={"AIMEM_PORT_BASE": "19300"})
        assert s.port_base == 19300 and s.bus.nats_url == "nats://127.0.0.1:19199"
    finally:
        _kill(child)
        sup.kill()
        sup.wait(10)
    s = config.load(tmp_path, environ={})  # its supervisor is gone: the record is ignored
    assert s.port_base == config.DEFAULT_PORT_BASE and s.bus.nats_url != "nats://127.0.0.1:19199"
