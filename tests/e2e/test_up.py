"""The README's start command brings the whole stack up, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from aimem_common import bus as busmod
from aimem_common.config import BusSettings, PORT_OFFSETS
from aimem_common.natsserver import free_port

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e]
# Healthy within this many seconds: ~3 s on an idle 2-core box; a box running other test
# suites (load average 10+) has taken over 15 s to start five Python processes. Startup speed
# is measured by the benchmarks, not here: this guards against a stack that never comes up.
HEALTHY_BUDGET_S = 60.0


def processes_mentioning(needle: str) -> list[int]:
    """PIDs whose command line contains ``needle`` (scans /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmd and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids


def environ_mentioning(needle: str) -> list[int]:
    """PIDs whose environment contains ``needle`` (children inherit AIMEM_DATA_DIR)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle.encode() in env:
            pids.append(int(entry.name))
    return pids


def test_make_up_healthy_streams_then_sigint_cleans_up(tmp_path: Path) -> None:
    from aimem_testing.stack import free_port_block as _free_port_block

    data_dir = tmp_path / "stack-data"
    base = _free_port_block()
    nats_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    # The README command is `make up`; VENV points at the interpreter running the tests.
    env.update(AIMEM_DATA_DIR=str(data_dir), AIMEM_BUS__NATS_URL=f"nats://127.0.0.1:{nats_port}")
    venv = Path(sys.executable).parent.parent
    log = open(tmp_path / "make-up.log", "wb")
    # `make up` installs first when a pyproject changed; do that outside the health budget.
    subprocess.run(["make", "-s", "install", f"VENV={venv}"], cwd=REPO, env=env, stdout=log, stderr=log, check=True)
    proc = subprocess.Popen(
        ["make", "-s", "up", f"VENV={venv}", f"PORT_BASE={base}"],
        cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True,
    )
    try:
        t0 = time.monotonic()
        pending = set(PORT_OFFSETS)
        while pending and time.monotonic() - t0 < HEALTHY_BUDGET_S:
            for svc in list(pending):
                try:
                    r = httpx.get(f"http://127.0.0.1:{base + PORT_OFFSETS[svc]}/healthz", timeout=0.5)
                    if r.status_code == 200 and r.json()["status"] == "ok":
                        pending.discard(svc)
                except httpx.HTTPError:
                    pass
            time.sleep(0.1)
        elapsed = time.monotonic() - t0
        assert not pending, f"not healthy within {HEALTHY_BUDGET_S:g} s: {pending}\n{(tmp_path / 'make-up.log').read_text()[-3000:]}"
        print(f"make up: every service healthy after {elapsed:.1f} s")

        async def stream_names() -> set[str]:
            token = (data_dir / "auth" / "token").read_text().strip()  # the NATS of `make up` requires it
            nc = await busmod.connect(BusSettings(nats_url=f"nats://127.0.0.1:{nats_port}", token=token), name="t",
                                      reconnect=False)
            try:
                js = nc.jetstream()
                return {(await js.stream_info(n)).config.name for n in (busmod.MUT_STREAM, busmod.EVT_STREAM)}
            finally:
                await nc.close()

        assert asyncio.run(stream_names()) == {"AIMEM_MUT", "AIMEM_EVT"}
        assert (data_dir / "db" / "memory.sqlite").exists()
        assert len(environ_mentioning(str(data_dir))) >= 6  # supervisor + 5 services (+ make)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (environ_mentioning(str(data_dir)) or processes_mentioning(str(data_dir))):
        time.sleep(0.1)
    assert environ_mentioning(str(data_dir)) == []
    assert processes_mentioning(str(data_dir)) == []  # nats-server's -sd names the data dir


def test_crashed_service_is_restarted(stack, tmp_path: Path) -> None:
    r = httpx.get(stack.url("query") + "/healthz")
    assert r.status_code == 200
    pids = [p for p in environ_mentioning(str(stack.data_dir)) if "aimem_query" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 15
    ok = False
    while time.monotonic() < deadline:
        try:
            ok = httpx.get(stack.url("query") + "/healthz", timeout=0.5).status_code == 200
            new = [p for p in environ_mentioning(str(stack.data_dir)) if "aimem_query" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
            if ok and new and new != pids:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    assert ok
    assert "query exited" in (stack.log_dir / "up.log").read_text()


AIMEM = str(Path(sys.executable).with_name("aimem"))


def _start_up(data_dir: Path, base: int, nats_port: int | None, log: Path) -> subprocess.Popen:
    """``aimem up`` in its own session (its log in ``log``), with no AIMEM_* from the caller
    (``nats_port`` None: no ``--nats-port``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    nats = [] if nats_port is None else ["--nats-port", str(nats_port)]
    with open(log, "ab") as out:
        return subprocess.Popen([AIMEM, "up", "--data-dir", str(data_dir), "--port-base", str(base), *nats,
                                 "--health-timeout", "90"],
                                env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_healthy(base: int, log: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + HEALTHY_BUDGET_S
    pending = set(PORT_OFFSETS)
    while pending and time.monotonic() < deadline and proc.poll() is None:
        for svc in list(pending):
            try:
                if httpx.get(f"http://127.0.0.1:{base + PORT_OFFSETS[svc]}/healthz", timeout=0.5).status_code == 200:
                    pending.discard(svc)
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    assert not pending, f"not healthy (exit {proc.poll()}): {pending}\n{log.read_text()[-3000:]}"


def _left_running(data_dir: Path, timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (environ_mentioning(str(data_dir)) or processes_mentioning(str(data_dir))):
        time.sleep(0.1)
    return sorted(set(environ_mentioning(str(data_dir)) + processes_mentioning(str(data_dir))))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_kill_9_of_aimem_up_leaves_nothing_running_and_the_next_up_is_healthy(tmp_path: Path) -> None:
    from aimem_testing.stack import free_port_block

    data_dir, log = tmp_path / "d", tmp_path / "up.log"
    base, nats_port = free_port_block(), free_port()
    proc = _start_up(data_dir, base, nats_port, log)
    try:
        _wait_healthy(base, log, proc)
        assert processes_mentioning(str(data_dir / "nats"))  # its nats-server, found by its store
        os.kill(proc.pid, signal.SIGKILL)  # the supervisor only: no Ctrl-C, no clean-up
        proc.wait(10)
        assert _left_running(data_dir) == []  # nats-server included (it outlived it before)
    finally:
        _stop(proc)
        for pid in _left_running(data_dir, 0):
            os.kill(pid, signal.SIGKILL)
    again = _start_up(data_dir, base, nats_port, log)
    try:
        _wait_healthy(base, log, again)
    finally:
        _stop(again)
    assert _left_running(data_dir) == []


def test_a_stale_nats_server_of_the_data_dir_is_stopped_by_the_next_up(tmp_path: Path) -> None:
    """A nats-server orphaned by an earlier supervisor (as before PR_SET_PDEATHSIG): found by its
    pid file, checked to be this data dir's, stopped; the new stack comes up on the same port."""
    from aimem_testing.stack import free_port_block

    data_dir, log = tmp_path / "d", tmp_path / "up.log"
    base, nats_port = free_port_block(), free_port()
    data_dir.mkdir()
    orphan = ("import sys; from aimem_common.natsserver import NatsServer;"
              f"s = NatsServer({str(data_dir / 'nats')!r}, port={nats_port}).start(); print(s.proc.pid)")
    out = subprocess.run([sys.executable, "-c", orphan], capture_output=True, text=True, timeout=60, check=True)
    stale = int(out.stdout.split()[-1])  # its parent has exited: nothing will ever stop it
    try:
        assert Path(f"/proc/{stale}").exists() and (data_dir / "nats.pid").read_text().strip() == str(stale)
        proc = _start_up(data_dir, base, nats_port, log)
        try:
            _wait_healthy(base, log, proc)
            assert not Path(f"/proc/{stale}/cmdline").exists() or not Path(f"/proc/{stale}/cmdline").read_bytes()
            assert f"stopped a stale nats-server (pid {stale})" in log.read_text()
            # A second aimem up on the same data dir is told which process to stop, and stops nothing.
            second = subprocess.run([AIMEM, "up", "--data-dir", str(data_dir), "--port-base", str(free_port_block()),
                                     "--nats-port", str(nats_port)], capture_output=True, text=True, timeout=60,
                                    env={k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")})
            assert second.returncode == 1
            assert f"run by another aimem up (pid {proc.pid})" in second.stderr, second.stderr
            _wait_healthy(base, log, proc)
        finally:
            _stop(proc)
    finally:
        try:
            os.kill(stale, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert _left_running(data_dir) == []


def test_a_stack_moved_with_port_base_takes_a_free_nats_port(tmp_path: Path) -> None:
    """``aimem up --port-base B`` without ``--nats-port`` (a second stack beside the usual one)
    does not take NATS's default 4222, which the first stack holds: it picks a free port and
    records it in ``run/up.json``, where the CLI's NATS verbs find it."""
    import json

    from aimem_testing.stack import free_port_block

    data_dir, log = tmp_path / "d", tmp_path / "up.log"
    base = free_port_block()
    proc = _start_up(data_dir, base, None, log)
    try:
        _wait_healthy(base, log, proc)
        nats_url = json.loads((data_dir / "run" / "up.json").read_text())["nats_url"]
        port = int(nats_url.rsplit(":", 1)[1])
        assert port != 4222, nats_url
        assert f"nats://127.0.0.1:{port}" in log.read_text()  # the one it started
    finally:
        _stop(proc)
    assert _left_running(data_dir) == []
