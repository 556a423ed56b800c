"""JetStream's own disk: too small at start, and full while running.

* a store too small for the configured stream limits: the limits are clamped with a
  warning and the stack starts; one too small for even the minimum: every service exits
  with a configuration error (2) once, and the supervisor does not restart-loop them;
* the store's disk fills: hooks get 503 + ``Retry-After`` (never a hang), ingress's
  ``/healthz`` turns red, the supervisor sees the store error on nats-server's ``/healthz``
  and restarts it, and once space returns hooks are accepted again without anyone
  restarting anything; every 202 is stored.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import httpx
import pytest

from aimem_common.natsserver import free_port
from aimem_testing.stack import LocalStack, free_port_block
from tests.chaos.conftest import PROMPT, PostLog, health, post_paced, wait_stored

pytestmark = [pytest.mark.chaos]


def _logs(log_dir) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log")))


def test_jetstream_disk_full_recovers_without_a_manual_restart(tmp_path, tmpfs) -> None:
    data, logs = tmp_path / "data", tmp_path / "logs"
    disk = tmpfs(data / "nats", "32m")
    with LocalStack(data, logs) as stack:
        assert "clamped" in _logs(logs), "stream limits above the store's size were not clamped with a warning"
        assert (logs / "nats.log").stat().st_size > 0
        disk.fill(leave_bytes=0)
        log = PostLog()
        red = []

        async def run() -> None:
            async def watch() -> None:
                for _ in range(24):
                    status, body = await asyncio.to_thread(health, stack.url("ingress"))
                    if status == 503:
                        red.append(body.get("checks"))
                    await asyncio.sleep(0.5)

            w = asyncio.create_task(watch())
            await post_paced(stack.url("ingress"), rate=20, seconds=10, log=log, filler=4000, token=stack.token)
            await w

        asyncio.run(run())
        assert log.refused, "the full JetStream disk never refused a hook"
        assert log.statuses() <= {429, 503}, log.statuses()
        assert all(ra and int(ra) >= 1 for _, ra, _ in log.refused), "a refusal without Retry-After"
        assert log.errors == 0, "a hook hung or the connection failed"
        assert red and any(c and c.get("jetstream") is False for c in red), f"ingress stayed green: {red}"

        disk.unfill()  # space returns; nobody restarts anything by hand
        t0 = time.monotonic()
        accepted_again = None
        with httpx.Client(base_url=stack.url("ingress"), timeout=5, headers=stack.headers) as client:
            while time.monotonic() - t0 < 60:
                r = client.post("/hook?agent=claude-code", json={**PROMPT, "prompt": f"after {time.monotonic()}"})
                if r.status_code == 202:
                    accepted_again = time.monotonic() - t0
                    log.accepted[-1] = r.json()["accepted"]
                    break
                time.sleep(0.5)
        assert accepted_again is not None, "JetStream did not recover after space returned"
        up_log = (logs / "up.log").read_text()
        assert "JetStream store error" in up_log and "restarting nats-server" in up_log
        expected = set(log.accepted.values())
        ids, _ = wait_stored(data / "db" / "memory.sqlite", expected, timeout_s=60)
        assert set(ids) == expected and len(ids) == len(set(ids))
        print(f"JetStream disk full: {len(log.refused)} refused ({sorted(log.statuses())}), "
              f"hooks accepted again {accepted_again:.1f} s after space returned; {len(expected)} stored")


def test_jetstream_disk_too_small_is_one_clear_error_not_a_restart_loop(tmp_path, tmpfs) -> None:
    data, logs = tmp_path / "data", tmp_path / "logs"
    tmpfs(data / "nats", "4m")  # JetStream may use 3 MiB of it: below the 4 MiB minimum stream
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    with open(logs / "up.log", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aimem_cli", "up", "--data-dir", str(data), "--port-base", str(free_port_block()),
             "--nats-port", str(free_port()), "--log-dir", str(logs), "--health-timeout", "20"],
            env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if (logs / "up.log").read_text().count("configuration error") >= 5:
                break
            time.sleep(0.5)
        time.sleep(3)  # long enough for a restart loop to show (the first backoff is 1 s)
        up_log = (logs / "up.log").read_text()
    finally:
        proc.send_signal(2)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(5)
    assert up_log.count("configuration error") == 5, up_log
    assert "restarting writer" not in up_log and "restarting ingress" not in up_log
    assert "JetStream has no room for stream AIMEM_MUT" in _logs(logs)
