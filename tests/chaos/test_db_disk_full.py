"""The database's disk fills under a steady hook load: nothing acknowledged is lost.

While the writer cannot store, its ``/healthz`` and the ingress's are red and hooks get
507 (or 503/429) with ``Retry-After`` instead of a 202; once space returns, the writer
resumes by itself and every 202 is stored exactly once.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aimem_testing.stack import LocalStack
from tests.chaos.conftest import PostLog, health, post_paced, wait_stored

pytestmark = [pytest.mark.chaos]


def test_db_disk_full_under_load_loses_nothing(tmp_path, tmpfs) -> None:
    data = tmp_path / "data"
    disk = tmpfs(data / "db", "8m")
    with LocalStack(data, tmp_path / "logs") as stack:
        disk.fill(leave_bytes=3 * 1024 * 1024)  # a few seconds of this load (WAL frames) fill it
        log = PostLog()
        red: dict[str, float] = {}
        stop = asyncio.Event()

        async def watch() -> None:
            t0 = time.monotonic()
            while not stop.is_set():
                for svc in ("writer", "ingress"):
                    status, body = await asyncio.to_thread(health, stack.url(svc))
                    if status == 503 and svc not in red:
                        red[svc] = time.monotonic() - t0
                        red[svc + "_checks"] = body.get("checks")
                await asyncio.sleep(0.5)

        async def load() -> None:
            w = asyncio.create_task(watch())
            await post_paced(stack.url("ingress"), rate=100, seconds=10, log=log)
            stop.set()
            await w

        asyncio.run(load())
        assert disk.free_bytes() < 64 * 1024, "the load did not fill the DB disk"
        assert 507 in log.statuses(), f"no 507 while the disk was full: {sorted(log.statuses())}"
        assert log.statuses() <= {429, 503, 507}
        assert all(ra and int(ra) >= 1 for _, ra, _ in log.refused), "a refusal without Retry-After"
        assert "writer" in red and "ingress" in red, f"health stayed green: {red}"
        assert red["writer_checks"]["store"]["reason"] == "disk_full"
        # ~3 MiB of WAL room holds some seconds of this load: fewer on a loaded box
        assert len(log.accepted) >= 20 and log.errors == 0

        disk.unfill()
        disk.resize("256m")  # space returns: no restart, no operator
        expected = set(log.accepted.values())
        ids, waited = wait_stored(data / "db" / "memory.sqlite", expected, timeout_s=90)
        assert set(ids) == expected, f"lost {len(expected - set(ids))} of {len(expected)} acknowledged events"
        assert len(ids) == len(set(ids)), "an event was stored twice"
        deadline = time.monotonic() + 15
        while health(stack.url("writer"))[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.25)
        assert health(stack.url("writer"))[0] == 200
        print(f"db disk full: {len(expected)} accepted, {len(log.refused)} refused "
              f"({sorted(log.statuses())}), all stored {waited:.1f} s after space returned")
