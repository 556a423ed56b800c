"""A failure after the COMMIT and before the acks (the requested git checkpoint, the replies,
the events, the acks themselves) is retried in place (``InPlaceRetry.step``), on a real
nats-server with the real consumer, writer thread, database and wiki: the committed batch is
not applied again, its callers get one reply each, before the replies of later batches, its
events go out once, and its messages are acked at once (not left to ``ack_wait_s``).

The fault is one of the consumer's or applier's own methods made to raise once.
"""

from __future__ import annotations

import asyncio
import errno
import json
import time

import pygit2
import pytest

from aimem_common import bus as busmod
from aimem_common.commands import make_envelope
from aimem_common.errors import UnavailableError

from aimem_writer.consumer import Consumer

from .realwriter import durable_state, real_writer, running, tuned

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

ACK_WAIT_S = 30.0  # far beyond each test's bound: a batch left to JetStream would show


def _fail_once(monkeypatch, obj, name: str, exc: BaseException) -> list[int]:
    """Make ``obj.<name>`` raise ``exc`` on its first call; returns ``[calls]``."""
    original = getattr(obj, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 1:
            raise exc
        return original(*args, **kwargs)

    async def async_wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 1:
            raise exc
        return await original(*args, **kwargs)

    monkeypatch.setattr(obj, name, async_wrapper if asyncio.iscoroutinefunction(original) else wrapper)
    return calls


@pytest.mark.timeout(60)
@pytest.mark.parametrize("step", ["checkpoint", "events", "ack"])
async def test_a_failure_after_the_commit_is_retried_in_place(settings, bus, monkeypatch, step) -> None:
    """The first batch (a page write and a requested checkpoint, both waited for) commits, then
    ``step`` fails once. Its callers are answered once (the checkpoint with the commit it
    made), before the caller of a command published after the failure; its ``page.changed``
    event goes out once; every message is delivered once and acked well within
    ``ack_wait_s``; the failure is counted as ``scope="post_apply"``."""
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, batch_linger_ms=0.0, git_debounce_ms=60_000)
    async with real_writer(w, bus) as (thread, applier, metrics):
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        if step == "checkpoint":  # e.g. the .git directory refusing the index lock
            calls = _fail_once(monkeypatch, applier, "checkpoint", PermissionError(errno.EACCES, "Permission denied"))
        elif step == "events":
            calls = _fail_once(monkeypatch, consumer.settlement, "publish_events", RuntimeError("events broke"))
        else:
            calls = _fail_once(monkeypatch, consumer.settlement, "settle", RuntimeError("ack broke"))
        replies: list[tuple[str, dict]] = []
        events: list[dict] = []

        def waiter(name: str):
            async def on_reply(msg) -> None:
                replies.append((name, json.loads(msg.data)))
            return on_reply

        async def on_event(msg) -> None:
            if msg.subject == busmod.evt_subject("page.changed"):
                events.append(json.loads(msg.data))

        subs = [await bus.nc.subscribe(busmod.EVT_SUBJECTS, cb=on_event)]
        inboxes = {}
        for name in ("write", "checkpoint", "later"):
            inboxes[name] = bus.nc.new_inbox()
            subs.append(await bus.nc.subscribe(inboxes[name], cb=waiter(name)))
        await bus.publish(make_envelope("page.write", {"path": "notes/a.md", "body": "# A\nalpha"}, project="app"),
                          reply_to=inboxes["write"])
        await bus.publish(make_envelope("wiki.checkpoint", {}), reply_to=inboxes["checkpoint"])
        async with running(consumer):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not calls[0]:
                await asyncio.sleep(0.01)
            assert calls[0], f"{step} was never reached"
            await bus.publish(make_envelope("page.write", {"path": "notes/b.md", "body": "# B\nbeta"}, project="app"),
                              reply_to=inboxes["later"])
            t0 = time.monotonic()
            while time.monotonic() < t0 + 10 and len(replies) < 3:
                await asyncio.sleep(0.02)
            answered_s = time.monotonic() - t0
            await asyncio.sleep(0.5)  # a second reply or event would show by now
            delivered, redelivered, ack_pending = await durable_state(bus.js)
        for sub in subs:
            await sub.unsubscribe()
        repo = pygit2.Repository(str(settings.wiki_dir))
        head = None if repo.head_is_unborn else str(repo.head.target)
    names = [name for name, _ in replies]
    assert sorted(names) == ["checkpoint", "later", "write"], f"{names} after {answered_s:.1f} s"
    assert names.index("checkpoint") < names.index("later"), names  # the failed batch is answered first
    by_name = dict(replies)
    assert all(r["ok"] and not r.get("duplicate") for r in by_name.values()), by_name
    assert by_name["checkpoint"]["result"]["commit"] == head  # the commit it made (debounce: no later one)
    assert sorted(e["path"] for e in events) == ["notes/a.md", "notes/b.md"], events
    assert (delivered, redelivered, ack_pending) == (3, 0, 0)
    assert answered_s < 5, answered_s
    assert metrics.batch_failures.labels("post_apply")._value.get() == 1
    assert metrics.duplicates.labels("page.write")._value.get() == 0


@pytest.mark.timeout(60)
async def test_a_checkpoint_that_keeps_failing_is_given_up_and_answered_as_unavailable(settings, bus,
                                                                                       monkeypatch) -> None:
    """The requested git checkpoint fails every time: after ``max_deliver`` attempts it is
    given up, its caller gets an ``unavailable`` error (not a ``commit: null`` that reads
    as "nothing to commit"), the batch is acked, and the writer goes on."""
    w = tuned(settings, ack_wait_s=ACK_WAIT_S, batch_linger_ms=0.0, git_debounce_ms=60_000, max_deliver=2)
    async with real_writer(w, bus) as (thread, applier, metrics):
        def broken(reason=None):
            raise PermissionError(errno.EACCES, "Permission denied")

        monkeypatch.setattr(applier, "checkpoint", broken)
        consumer = Consumer(w, bus.nc, thread, applier, metrics)
        async with running(consumer):
            t0 = time.monotonic()
            with pytest.raises(UnavailableError):
                await bus.request(make_envelope("wiki.checkpoint", {}), timeout_s=10)
            answered_s = time.monotonic() - t0
            later = await bus.request(make_envelope("page.write", {"path": "notes/c.md", "body": "# C\ngamma"},
                                                    project="app"), timeout_s=10)
            delivered, redelivered, ack_pending = await durable_state(bus.js)
    assert answered_s < 5, answered_s
    assert later["page_id"] > 0
    assert (delivered, redelivered, ack_pending) == (2, 0, 0)
    assert metrics.batch_failures.labels("post_apply")._value.get() == 2
