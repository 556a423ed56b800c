"""Bundles of gathered hook commands (``aimem_common.bundles``) on a real nats-server, through
the real writer: fewer messages than commands, every command stored once, a bundle that must
come back comes back whole and still stores each command once."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
import time

import pytest

from aimem_common import bus as busmod
from aimem_common.bundles import Gatherer
from aimem_common.bus import BUNDLE_HEADER
from aimem_common.commands import make_envelope
from aimem_common.errors import RetryableError, UnavailableError
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize

from aimem_writer import registry
from aimem_writer.consumer import Consumer

from .realwriter import real_writer, running

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(90)]


def _obs(i: int, key: str | None = None):
    raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    return make_envelope("observation.append", sanitize(raw).to_payload(), project="app", idempotency_key=key)


def _gatherer(bus, **kw) -> Gatherer:
    return Gatherer(bus, **{"max_cmds": 64, "max_bytes": 1 << 20, "max_inflight": 1, **kw})


async def _stream_messages(bus) -> int:
    return (await bus.js.stream_info(busmod.MUT_STREAM)).state.messages


@contextlib.asynccontextmanager
async def _running_writer(settings, bus):
    """A ``Consumer`` running on ``real_writer``'s thread, database and wiki."""
    async with real_writer(settings, bus) as (thread, applier, metrics):
        consumer = Consumer(settings, bus.nc, thread, applier, metrics)
        async with running(consumer):
            yield consumer


def _titles(settings) -> list[str]:
    try:
        ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return []
    try:
        return [r[0] for r in ro.execute("SELECT title FROM observations ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        ro.close()


async def _wait_titles(settings, n: int, timeout_s: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(titles := _titles(settings)) >= n:
            return titles
        await asyncio.sleep(0.05)
    return _titles(settings)


async def test_concurrent_commands_travel_in_fewer_messages_and_are_each_stored_once(settings, bus) -> None:
    """40 commands published at once: each caller gets its PubAck, the stream holds fewer
    messages than commands (bundles), and the writer stores all 40, once each."""
    gatherer = _gatherer(bus)
    results = await asyncio.gather(*(gatherer.publish(_obs(i)) for i in range(40)))
    assert all(r.seq > 0 for r in results)
    messages = await _stream_messages(bus)
    assert 1 <= messages <= 20, messages  # one in flight at a time: the rest gathered behind it
    async with _running_writer(settings, bus):
        titles = await _wait_titles(settings, 40)
        await asyncio.sleep(0.3)  # anything stored twice would show by now
    assert sorted(titles) == sorted(f"Prompt {i}" for i in range(40))
    assert await _stream_messages(bus) == 0  # every message acked (work queue)


async def test_a_lone_command_is_its_own_message_and_reports_duplicates(settings, bus) -> None:
    gatherer = _gatherer(bus)
    first = await gatherer.publish(_obs(1, key="k1"))
    again = await gatherer.publish(_obs(1, key="k1"))
    assert not first.duplicate and again.duplicate
    info = await bus.js.get_msg(busmod.MUT_STREAM, first.seq)
    assert info.subject == busmod.mut_subject("observation.append")
    assert BUNDLE_HEADER not in (info.headers or {})


async def test_a_retry_gathered_into_a_bundle_is_applied_once(settings, bus) -> None:
    """A command stored alone, then retried inside a bundle (JetStream cannot see it as a
    duplicate there): the writer's ingest keys apply it once."""
    gatherer = _gatherer(bus)
    await gatherer.publish(_obs(1, key="k1"))
    await asyncio.gather(*(gatherer.publish(_obs(i, key=f"k{i}")) for i in (1, 2, 3, 4)))
    async with _running_writer(settings, bus):
        titles = await _wait_titles(settings, 4)
        await asyncio.sleep(0.3)
    assert sorted(titles) == ["Prompt 1", "Prompt 2", "Prompt 3", "Prompt 4"]


async def test_a_bundle_with_a_command_to_redeliver_comes_back_whole(settings, bus, monkeypatch) -> None:
    """One command of a bundle fails transiently once: the whole message is naked and
    redelivered; the commands applied the first time answer as duplicates, the failed one is
    applied: every command stored exactly once."""
    handler = registry.get("observation.append")
    failed: list[str] = []

    def flaky(tx, env, cmd):
        if cmd.title == "Prompt 3" and not failed:
            failed.append(env.cmd_id)
            raise RetryableError("transient")
        return original(tx, env, cmd)

    original = handler.fn
    monkeypatch.setitem(registry._HANDLERS, "observation.append", dataclasses.replace(handler, fn=flaky))
    gatherer = _gatherer(bus)
    await gatherer.publish(_obs(0))  # in flight while the next six gather into one bundle
    await asyncio.gather(*(gatherer.publish(_obs(i)) for i in range(1, 7)))
    assert await _stream_messages(bus) < 7
    async with _running_writer(settings, bus):
        titles = await _wait_titles(settings, 7, timeout_s=30)
        await asyncio.sleep(0.5)
    assert failed, "the transient failure never happened"
    assert sorted(titles) == sorted(f"Prompt {i}" for i in range(7))


async def test_every_caller_of_a_failed_bundle_gets_the_failure(settings, bus) -> None:
    """No stream takes the message: none of the gathered commands is acknowledged."""
    await bus.js.delete_stream(busmod.MUT_STREAM)
    gatherer = _gatherer(bus)
    outcomes = await asyncio.gather(*(gatherer.publish(_obs(i)) for i in range(8)), return_exceptions=True)
    assert len(outcomes) == 8 and all(isinstance(o, UnavailableError) for o in outcomes), outcomes


async def test_a_full_bundle_leaves_at_once_and_a_large_command_alone(settings, bus) -> None:
    gatherer = _gatherer(bus, max_cmds=4, max_inflight=64)
    await asyncio.gather(*(gatherer.publish(_obs(i)) for i in range(10)))
    sizes = []
    for seq in range(1, await _stream_messages(bus) + 1):
        msg = await bus.js.get_msg(busmod.MUT_STREAM, seq)
        sizes.append(int((msg.headers or {}).get(BUNDLE_HEADER, 1)))
    assert sum(sizes) == 10 and max(sizes) <= 4 and len(sizes) >= 3, sizes
    small = _gatherer(bus, max_bytes=200)  # every envelope is larger: each travels alone
    before = await _stream_messages(bus)
    await asyncio.gather(*(small.publish(_obs(i)) for i in range(3)))
    assert await _stream_messages(bus) == before + 3


def _poison():
    return _obs(99)  # "Prompt 99": its handler fails every time (a bug: a dead letter)


async def test_a_poison_bundled_with_a_redelivered_command_is_one_dead_letter(settings, bus, monkeypatch) -> None:
    """The bundle comes back twice for a sibling's transient failure; the poison runs again
    each time (a dead letter is not an ingest key) but stays one dead letter (found by a
    tester: one per delivery before)."""
    handler = registry.get("observation.append")
    original = handler.fn
    failed: list[str] = []

    def flaky(tx, env, cmd):
        if cmd.title == "Prompt 99":
            raise ValueError("a handler bug")
        if cmd.title == "Prompt 3" and len(failed) < 2:  # transient twice, then applied
            failed.append(env.cmd_id)
            raise RetryableError("transient")
        return original(tx, env, cmd)

    monkeypatch.setitem(registry._HANDLERS, "observation.append", dataclasses.replace(handler, fn=flaky))
    gatherer = _gatherer(bus)
    await gatherer.publish(_obs(0))  # in flight while the next ones gather into one bundle
    poison = _poison()
    await asyncio.gather(*(gatherer.publish(e) for e in [_obs(1), _obs(2), _obs(3), poison, _obs(4)]))
    assert await _stream_messages(bus) == 2  # obs 0 alone, the other five in one bundle
    async with _running_writer(settings, bus):
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and "Prompt 3" not in _titles(settings):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        titles = _titles(settings)
    assert len(failed) == 2, failed
    assert sorted(titles) == sorted(f"Prompt {i}" for i in range(5))  # every good command once
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    dead = ro.execute("SELECT cmd_id, deliveries FROM dead_letters").fetchall()
    ro.close()
    assert [cmd for cmd, _ in dead] == [poison.cmd_id], dead
    assert dead[0][1] >= 2  # the row says it was given up again on the redelivery


async def test_a_hook_whose_fields_are_clean_apart_is_stored_though_their_join_reads_as_a_key(settings, bus) -> None:
    """Each field passed the ingress's sanitize() and got its 202; the writer's one-pass
    check over the joined fields saw a private key across title and cwd and refused it
    (found by a tester): it is stored."""
    raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/tmp/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                         title="Prompt: -----BEGIN RSA PRIVATE KEY-----", body="-----BEGIN RSA PRIVATE KEY-----")
    await bus.publish(make_envelope("observation.append", sanitize(raw).to_payload(), project="app"))
    async with _running_writer(settings, bus):
        titles = await _wait_titles(settings, 1, timeout_s=20)
    assert titles == ["Prompt: -----BEGIN RSA PRIVATE KEY-----"]


async def test_a_poison_retried_with_its_key_into_one_bundle_is_one_dead_letter(settings, bus, monkeypatch) -> None:
    """Alone, a client's retries of a hook share its Nats-Msg-Id and JetStream drops them;
    gathered, every copy reaches the writer, and each was given up as a dead letter of its
    own (found by a tester: 4 copies, 4 dead letters). One dead letter per command."""
    handler = registry.get("observation.append")
    original = handler.fn

    def buggy(tx, env, cmd):
        if cmd.title == "Prompt 99":
            raise ValueError("a handler bug")
        return original(tx, env, cmd)

    monkeypatch.setitem(registry._HANDLERS, "observation.append", dataclasses.replace(handler, fn=buggy))
    gatherer = _gatherer(bus)
    await gatherer.publish(_obs(0))
    copies = [_obs(99, key="k99") for _ in range(3)]
    await asyncio.gather(*(gatherer.publish(e) for e in [*copies, _obs(1)]))
    assert await _stream_messages(bus) == 2
    async with _running_writer(settings, bus):
        titles = await _wait_titles(settings, 2, timeout_s=20)
        await asyncio.sleep(0.5)
    assert sorted(titles) == ["Prompt 0", "Prompt 1"]
    ro = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    dead = ro.execute("SELECT json_extract(envelope, '$.idempotency_key') FROM dead_letters").fetchall()
    ro.close()
    assert dead == [("k99",)], dead
