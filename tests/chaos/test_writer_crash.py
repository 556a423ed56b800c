"""The writer dies mid-batch (``kill -9``) or stops (``SIGSTOP``): nothing acknowledged is lost.

* kill -9 while a backlog is being applied: a new writer gets the dead one's in-flight
  commands within seconds (short ack wait), and every command is stored exactly once;
* SIGSTOP: ingress answers 429 with ``Retry-After`` once the writer is more than
  ``ingress.max_writer_delay_s`` behind (ingress samples it on its own clock), and after
  SIGCONT every 202 is stored exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.sanitize import RawObservation, sanitize
from aimem_common.models import ObservationKind
from aimem_testing.stack import LocalStack
from tests.chaos.conftest import PostLog, child_pid, post_paced, stored_cmd_ids, wait_stored

pytestmark = [pytest.mark.chaos, pytest.mark.integration]


async def _publish_backlog(settings, n: int) -> set[str]:
    nc = await busmod.connect(settings.bus, name="chaos", reconnect=False)
    try:
        await busmod.ensure_streams(nc.jetstream(), settings.bus)
        bus = busmod.Bus(nc, settings.bus)
        envs = []
        for i in range(n):
            raw = RawObservation(session_id="chaos-1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                                 cwd="/home/dev/chaos-proj", title="", body=f"backlog {i} " + "y" * 500)
            envs.append(make_envelope("observation.append", sanitize(raw).to_payload(), project="chaos-proj"))
        for start in range(0, n, 200):
            await asyncio.gather(*(bus.publish(e, timeout_s=10) for e in envs[start:start + 200]))
        return {e.cmd_id for e in envs}
    finally:
        await nc.close()


def test_kill9_writer_mid_batch_in_flight_back_within_seconds(settings, services) -> None:
    n = 4000
    expected = asyncio.run(_publish_backlog(settings, n))
    db = settings.db_path
    writer = services("writer", extra_env={"AIMEM_WRITER__BATCH_MAX_MSGS": "1000"})["writer"]
    deadline = time.monotonic() + 60
    while len(stored_cmd_ids(db)) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.kill()  # SIGKILL while the backlog is being applied
    killed_at = time.monotonic()
    before = len(set(stored_cmd_ids(db)))
    assert 0 < before < n, f"not mid-backlog: {before} of {n} stored at the kill"
    writer.start()
    ids, waited = wait_stored(db, expected, timeout_s=60)
    took = time.monotonic() - killed_at
    assert set(ids) == expected, f"lost {len(expected - set(ids))}"
    assert len(ids) == len(set(ids)), "stored twice"
    # The dead writer's in-flight batch (up to 1,000 commands) is redelivered after ack_wait_s
    # (5 s), not after a minute: everything is stored within 10 s of the restart.
    assert took < 10 + 5, f"in-flight commands came back only after {took:.1f} s"
    print(f"kill -9: {before}/{n} stored at the kill, all {n} stored {took:.1f} s after it")


def test_sigstop_writer_429_within_bound_and_nothing_lost(tmp_path) -> None:
    bound_s = 3.0
    env = {"AIMEM_INGRESS__MAX_WRITER_DELAY_S": str(bound_s), "AIMEM_INGRESS__LAG_CHECK_INTERVAL_S": "0.5"}
    with LocalStack(tmp_path / "data", tmp_path / "logs", extra_env=env) as stack:
        writer = child_pid(stack.proc.pid, "aimem_writer")
        log = PostLog()
        os.kill(writer, signal.SIGSTOP)
        try:
            asyncio.run(post_paced(stack.url("ingress"), rate=50, seconds=bound_s + 5, log=log, filler=200, token=stack.token))
        finally:
            os.kill(writer, signal.SIGCONT)
        first_429 = min((t for s, _, t in log.refused if s == 429), default=None)
        assert first_429 is not None, f"no 429 while the writer was stopped: {log.statuses()}"
        # the bound, plus one sample interval and a round trip of slack
        assert first_429 <= bound_s + 2.0, f"first 429 after {first_429:.1f} s (bound {bound_s} s)"
        assert log.statuses() == {429}
        assert all(ra == "2" for _, ra, _ in log.refused)
        expected = set(log.accepted.values())
        assert len(expected) >= 50
        ids, waited = wait_stored(stack.data_dir / "db" / "memory.sqlite", expected, timeout_s=60)
        assert set(ids) == expected and len(ids) == len(set(ids))
        print(f"SIGSTOP: first 429 {first_429:.1f} s after the stop (bound {bound_s} s); {len(expected)} accepted, "
              f"all stored {waited:.1f} s after SIGCONT")
