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
