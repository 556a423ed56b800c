"""Bus tests against a real nats-server: streams, dedupe, request/reply, back-pressure."""

from __future__ import annotations

import asyncio
import json

import nats.js.errors
import pytest

from aimem_common import bus as busmod
from aimem_common.config import BusSettings
from aimem_common.errors import BackPressureError, BusTimeoutError, NotFoundError, UnavailableError
from aimem_common.commands import make_envelope

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def env_for(body: str = "hello", key: str | None = None):
    return make_envelope(
        "page.write", {"path": "notes/a.md", "body": body}, project="proj", idempotency_key=key
    )


async def test_streams_have_design_settings(nats_server) -> None:
    settings = BusSettings(nats_url=nats_server.url)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        js = nc.jetstream()
        await busmod.ensure_streams(js, settings)
        await busmod.ensure_streams(js, settings)  # idempotent
        mut = (await js.stream_info(busmod.MUT_STREAM)).config
        assert mut.subjects == ["aimem.mut.>"]
        assert str(mut.retention.value if hasattr(mut.retention, "value") else mut.retention) == "workqueue"
        assert str(getattr(mut.discard, "value", mut.discard)) == "new"
        assert str(getattr(mut.storage, "value", mut.storage)) == "file"
        assert mut.duplicate_window == 120
        assert mut.max_bytes == settings.mut_max_bytes
        evt = (await js.stream_info(busmod.EVT_STREAM)).config
        assert evt.subjects == ["aimem.evt.>"] and str(getattr(evt.retention, "value", evt.retention)) == "limits"
        # Live first: the bulk lane is its own work queue with its own bound.
        bulk = (await js.stream_info(busmod.BULK_STREAM)).config
        assert bulk.subjects == ["aimem.bulk.>"] and bulk.max_bytes == settings.bulk_max_bytes
        assert str(getattr(bulk.retention, "value", bulk.retention)) == "workqueue"
        assert str(getattr(bulk.discard, "value", bulk.discard)) == "new" and bulk.duplicate_window == 120
        # The writer's two durables, one per stream (a work queue takes no overlapping consumers).
        await busmod.ensure_writer_consumer(js, ack_wait_s=5.0)
        await busmod.ensure_writer_consumer(js, ack_wait_s=5.0)  # idempotent
        live = (await js.consumer_info(busmod.MUT_STREAM, busmod.WRITER_DURABLE)).config
        imports = (await js.consumer_info(busmod.BULK_STREAM, busmod.BULK_DURABLE)).config
        assert (live.filter_subject, imports.filter_subject) == ("aimem.mut.>", "aimem.bulk.>")
        assert imports.max_deliver == -1 and imports.ack_wait == 5.0
    finally:
        await nc.close()


async def test_dedupe_by_msg_id(nats_server) -> None:
    settings = BusSettings(nats_url=nats_server.url)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        await busmod.ensure_streams(nc.jetstream(), settings)
        bus = busmod.Bus(nc, settings)
        first = await bus.publish(env_for(key="same-key"))
        again = await bus.publish(env_for(key="same-key"))
        other = await bus.publish(env_for(key="other-key"))
        assert first.duplicate is False and again.duplicate is True
        assert again.seq == first.seq and other.seq == first.seq + 1
        info = await nc.jetstream().stream_info(busmod.MUT_STREAM)
        assert info.state.messages == 2
        # headers carry the trace context and the dedupe id
        msg = await nc.jetstream().get_msg(busmod.MUT_STREAM, first.seq)
        assert msg.headers["Nats-Msg-Id"] == "same-key"
        assert json.loads(msg.data)["op"] == "page.write"
    finally:
        await nc.close()


async def test_request_reply_and_timeout(nats_server) -> None:
    settings = BusSettings(nats_url=nats_server.url, request_timeout_s=0.5)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        await busmod.ensure_streams(nc.jetstream(), settings)
        bus = busmod.Bus(nc, settings)
        # Nobody consumes: a clear timeout error, not a hang.
        with pytest.raises(BusTimeoutError, match="did not answer page.write within 0.5 s"):
            await bus.request(env_for("one"))

        # A minimal responder that answers like the writer does.
        async def responder(msg):
            env = json.loads(msg.data)
            reply_to = msg.headers.get(busmod.REPLY_HEADER)
            if env["payload"]["body"] == "bad":
                err = NotFoundError("no such page")
                await nc.publish(reply_to, busmod.make_reply(env["cmd_id"], error=err))
            else:
                await nc.publish(reply_to, busmod.make_reply(env["cmd_id"], result={"page_id": 7}))

        sub = await nc.subscribe("aimem.mut.page.write", cb=responder)
        assert await bus.request(env_for("two")) == {"page_id": 7}
        with pytest.raises(NotFoundError, match="no such page"):
            await bus.request(env_for("bad"))
        await sub.unsubscribe()
    finally:
        await nc.close()


async def test_full_stream_is_backpressure(nats_server) -> None:
    settings = BusSettings(nats_url=nats_server.url, mut_max_bytes=4096)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        await busmod.ensure_streams(nc.jetstream(), settings)
        bus = busmod.Bus(nc, settings)
        with pytest.raises(BackPressureError) as info:
            for i in range(100):
                await bus.publish(env_for("x" * 500, key=f"k{i}"))
        assert info.value.status == 429 and info.value.retry_after_s >= 1
        stored = (await nc.jetstream().stream_info(busmod.MUT_STREAM)).state.messages
        assert 0 < stored < 100
    finally:
        await nc.close()


async def test_unreachable_nats_is_unavailable() -> None:
    from aimem_common.natsserver import free_port

    settings = BusSettings(nats_url=f"nats://127.0.0.1:{free_port()}", connect_timeout_s=0.5)
    with pytest.raises(UnavailableError, match="cannot connect"):
        await asyncio.wait_for(busmod.connect(settings, name="t", reconnect=False), 5)


async def test_concurrent_publishes_each_get_their_own_puback(nats_server) -> None:
    """Pipelined publishes on one connection: each caller gets the PubAck of its own message
    (its sequence holds its envelope), on one reply subscription."""
    settings = BusSettings(nats_url=nats_server.url)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        await busmod.ensure_streams(nc.jetstream(), settings)
        bus = busmod.Bus(nc, settings)
        envs = [env_for(f"body-{i}", key=f"c{i}") for i in range(200)]
        subs_before = len(nc._subs)
        results = await asyncio.gather(*(bus.publish(e) for e in envs))
        assert sorted(r.seq for r in results) == list(range(1, 201))
        for env, res in zip(envs[::37], results[::37]):
            msg = await nc.jetstream().get_msg(busmod.MUT_STREAM, res.seq)
            assert json.loads(msg.data)["cmd_id"] == env.cmd_id
        assert len(nc._subs) == subs_before + 1  # the one reply subscription
        # Interleaved with publishes no stream takes (answered at once by the server): each
        # caller still gets its own answer.
        subjects = [busmod.mut_subject("page.write") if i % 3 else f"nostream.{i}" for i in range(30)]
        outcomes = await asyncio.gather(*(bus.acks.publish(subj, f"m{i}".encode(), headers={}, timeout_s=2)
                                          for i, subj in enumerate(subjects)), return_exceptions=True)
        for i, (subj, got) in enumerate(zip(subjects, outcomes)):
            if subj.startswith("nostream"):
                assert isinstance(got, nats.js.errors.NoStreamResponseError), (i, got)
            else:
                msg = await nc.jetstream().get_msg(busmod.MUT_STREAM, got["seq"])
                assert msg.data == f"m{i}".encode()
        assert bus.acks._waiting == {}
    finally:
        await nc.close()


async def test_a_publish_without_a_stream_or_a_puback_is_unavailable(nats_server) -> None:
    settings = BusSettings(nats_url=nats_server.url, publish_timeout_s=0.3)
    nc = await busmod.connect(settings, name="t", reconnect=False)
    try:
        bus = busmod.Bus(nc, settings)  # no streams yet: nobody stores aimem.mut.*
        with pytest.raises(UnavailableError) as info:
            await bus.publish(env_for("lost"))
        assert info.value.code == "bus_unavailable"
        # Something answers nothing on the subject (a core subscriber, not a stream): no PubAck in time.
        async def silent(msg) -> None:
            pass

        sub = await nc.subscribe("aimem.mut.page.write", cb=silent)
        with pytest.raises(UnavailableError) as info:
            await bus.publish(env_for("unacknowledged"))
        assert info.value.code == "bus_timeout" and not bus.jetstream_storing()
        await sub.unsubscribe()
        assert bus.acks._waiting == {}
    finally:
        await nc.close()
