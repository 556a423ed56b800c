"""A batch stays within the writer's command budget, whatever its messages carry: bundles of
gathered hooks (``aimem_common.bundles``, up to ``ingress.bundle_max_cmds`` commands a
message) in a backlog, on a real nats-server with the real consumer, writer thread, database
and wiki. The budget is ``writer.batch_max_msgs`` commands, ``writer.batch_max_msgs_behind``
while more are pending; a batch may pass it by the rest of the message that crosses it."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize

from aimem_writer.batch import Applier
from aimem_writer.consumer import Consumer

from .realwriter import real_writer, running, stored_prompts, tuned, wait_stored

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

BUNDLE = 64  # commands per bundle: ingress.bundle_max_cmds' default
IDLE, BEHIND = 100, 300  # writer.batch_max_msgs, writer.batch_max_msgs_behind


class SizeRecorder(Applier):
    """The real applier; records the commands of every batch it is handed, and holds its first
    batch until ``release`` is set (up to 10 s), so a test can read what the writer holds."""

    def __init__(self, *args):
        super().__init__(*args)
        self.sizes: list[int] = []
        self.first = threading.Event()
        self.release = threading.Event()

    def apply(self, items):
        if items and not self.first.is_set():
            self.first.set()
            self.release.wait(10)
        self.sizes.append(len(items))
        return super().apply(items)


def _env(i: int):
    raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    return make_envelope("observation.append", sanitize(raw).to_payload(), project="app", idempotency_key=f"k{i}")


async def _publish(bus, numbers: range, per_msg: int) -> None:
    """Publish ``Prompt <i>`` for each ``i`` of ``numbers`` in order, ``per_msg`` a message
    (1: alone, as ingress sends a lone hook)."""
    nums = list(numbers)
    for start in range(0, len(nums), per_msg):
        envs = [_env(i) for i in nums[start:start + per_msg]]
        if per_msg == 1:
            await bus.publish(envs[0])
        else:
            await bus.publish_bundle(envs, [e.model_dump_json().encode() for e in envs])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backlog", ["bundles", "singles_then_bundles"])
async def test_a_backlog_of_bundles_is_applied_within_the_command_budget(settings, bus, backlog) -> None:
    """``bundles``: 40 bundles of 64 (2,560 commands) wait when the writer starts; its first
    fetch used to take all 40 as one batch. ``singles_then_bundles``: 600 lone commands, then
    the bundles: a fetch sized by the singles' one command a message used to take hundreds
    of bundles at once. Every batch stays within the budget plus one message's worth, the
    first within the idle budget, and every command is stored once, in published order."""
    singles = 600 if backlog == "singles_then_bundles" else 0
    await _publish(bus, range(1, singles + 1), 1)
    await _publish(bus, range(singles + 1, singles + 40 * BUNDLE + 1), BUNDLE)
    total = singles + 40 * BUNDLE
    w = tuned(settings, batch_max_msgs=IDLE, batch_max_msgs_behind=BEHIND, batch_linger_ms=0.0)
    async with real_writer(w, bus, SizeRecorder) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        async with running(consumer):
            deadline = asyncio.get_running_loop().time() + 20
            while not applier.first.is_set() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # the prefetch behind the first batch arrives meanwhile
            in_hand = (await bus.js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)).num_ack_pending
            applier.release.set()
            stored = await wait_stored(settings, total, 60)
            await asyncio.sleep(0.3)  # a late duplicate would show
            stored = stored_prompts(settings)
        info = await bus.js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)
    sizes = [n for n in applier.sizes if n]
    assert stored == list(range(1, total + 1)), f"stored {len(stored)} of {total}"
    assert sum(sizes) == total, sizes
    assert sizes[0] <= IDLE + BUNDLE - 1, sizes
    assert max(sizes) <= BEHIND + BUNDLE - 1, sizes
    # ... and in batches about that large (a backlog in hand is "behind"), not the idle size
    assert len(sizes) <= math.ceil(total / (BEHIND - BUNDLE + 1)) + 3, sizes
    # the first fetch asked for full bundles' worth (1 message), the prefetch for 300 commands'
    assert in_hand <= 1 + 300, in_hand
    if backlog == "bundles":
        assert in_hand <= 1 + BEHIND // BUNDLE, in_hand
    assert info.num_redelivered == 0 and info.num_ack_pending == 0
