"""Publishing commands with dedupe and PubAcks, request/reply to the writer, the writer's lag."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.api
import nats.js.errors
import orjson
from nats.aio.client import Client as NATS
from opentelemetry import trace
from prometheus_client import CollectorRegistry, Histogram

from aimem_common.bus.codec import BUNDLE_HEADER, BUNDLE_OP, encode_bundle, parse_reply, trace_headers
from aimem_common.bus.subjects import LANES, LIVE, MSG_ID_HEADER, REPLAY_HEADER, REPLY_HEADER, mut_subject
from aimem_common.commands import Envelope
from aimem_common.config import BusSettings
from aimem_common.errors import BackPressureError, BusTimeoutError, UnavailableError
from aimem_common.telemetry import tracing_enabled

log = logging.getLogger("aimem.bus")

# JetStream err_codes that mean "the stream is full" (discard=new).
_FULL_ERR_CODES = {10077, 10047, 10028}


class PubAcks:
    """JetStream publishes on one connection, each waiting for its own PubAck, with one
    reply subscription for all of them.

    ``JetStreamContext.publish`` is a full request per call (a reply future behind
    ``asyncio.wait_for`` and a done-callback, the PubAck decoded into a dataclass). Here a
    publish is the core ``publish`` with ``reply=<prefix>.<n>`` plus a future in a dict that
    the reply callback resolves; the PubAck stays a dict. Publishes are pipelined on the
    connection as before (PubAcks may come back in any order), and every caller still
    waits for the PubAck of its own message. nats-py re-subscribes the reply subject after a
    reconnect, as it does for its own request inbox.
    """

    def __init__(self, nc: NATS):
        self.nc = nc
        self._prefix: str | None = None
        self._waiting: dict[str, asyncio.Future] = {}
        self._next = 0
        self._subscribing = asyncio.Lock()

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
        """Publish and return the stream's PubAck (``{"stream", "seq", "duplicate"?}``).

        Raises:
            nats.js.errors.APIError: JetStream refused the message (its error object).
            nats.js.errors.NoStreamResponseError: no stream answered (no responders).
            asyncio.TimeoutError: no PubAck within ``timeout_s``.
            nats.errors.Error / OSError: the connection is closed or reconnecting.
        """
        if self._prefix is None:
            async with self._subscribing:  # one reply subscription, even for concurrent first publishes
                if self._prefix is None:
                    prefix = self.nc.new_inbox()
                    await self.nc.subscribe(f"{prefix}.*", cb=self._on_ack)
                    self._prefix = prefix
        self._next += 1
        token = str(self._next)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        try:
            await self.nc.publish(subject, data, reply=f"{self._prefix}.{token}", headers=headers)
            async with asyncio.timeout(timeout_s):
                msg = await fut
        finally:
            self._waiting.pop(token, None)
        if msg.headers and msg.headers.get(nats.js.api.Header.STATUS) == _NO_RESPONDERS:
            raise nats.js.errors.NoStreamResponseError
        ack = orjson.loads(msg.data)
        if "error" in ack:
            raise nats.js.errors.APIError.from_error(ack["error"])
        return ack

    async def _on_ack(self, msg) -> None:
        fut = self._waiting.get(msg.subject.rpartition(".")[2])
        if fut is not None and not fut.done():
            fut.set_result(msg)


_NO_RESPONDERS = "503"  # the status of the empty reply when no stream listens on the subject


@dataclass(slots=True)
class PublishResult:
    """Outcome of a publish: the JetStream sequence and whether it was a duplicate."""

    seq: int
    duplicate: bool


class Bus:
    """Publishing side of the bus, shared by every service (not the writer's consumer).

    Construct with a connected client; methods run on the event loop.
    """

    def __init__(self, nc: NATS, settings: BusSettings, registry: CollectorRegistry | None = None):
        self.nc = nc
        self.js = nc.jetstream()
        self.acks = PubAcks(nc)
        self.settings = settings
        self._publish_latency = Histogram(
            "aimem_bus_publish_seconds",
            "JetStream publish round trip (PubAck) in seconds",
            ["op"],
            registry=registry,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
        )
        self._request_latency = Histogram(
            "aimem_bus_request_seconds",
            "Command publish to writer reply in seconds",
            ["op"],
            registry=registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self._message_commands = Histogram(
            "aimem_bus_message_commands",
            "Commands per JetStream message stored (1, or a bundle of gathered hooks)",
            registry=registry,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
        )
        self._tracer = trace.get_tracer("aimem.bus")
        self.publish_ok_at = 0.0  # monotonic s of the last PubAck
        self.publish_failed_at = 0.0  # monotonic s of the last publish JetStream did not store

    async def publish(
        self, env: Envelope, *, reply_to: str | None = None, timeout_s: float | None = None,
        msg_id: str | None = None, replay_of: int | None = None, lane: str = LIVE,
    ) -> PublishResult:
        """Publish ``env`` to ``aimem.mut.<op>`` (``lane=BULK``: ``aimem.bulk.<op>``, the
        bulk lane of imports) and wait for the PubAck.

        Returns ``PublishResult(seq, duplicate)``; a duplicate (same ``Nats-Msg-Id`` within
        the dedupe window) is not stored twice. ``msg_id`` overrides the ``Nats-Msg-Id``
        (default ``env.dedupe_id``): a dead-letter replay must get past the stream's dedupe
        window while keeping the command's own idempotency key. ``replay_of`` (a dead
        letter's id) marks the message as that dead letter's replay (``REPLAY_HEADER``).

        Raises:
            BackPressureError: the lane's stream is full (``discard=new``).
            UnavailableError: NATS unreachable or no PubAck within ``timeout_s``.
        """
        headers = {MSG_ID_HEADER: msg_id or env.dedupe_id}
        if reply_to:
            headers[REPLY_HEADER] = reply_to
        if replay_of is not None:
            headers[REPLAY_HEADER] = str(replay_of)
        return await self._publish(env.op, env.model_dump_json().encode(), headers, env.cmd_id, 1, timeout_s, lane)

    async def publish_encoded(self, op: str, data: bytes, *, msg_id: str, cmd_id: str, lane: str = LIVE,
                              timeout_s: float | None = None) -> PublishResult:
        """``publish`` for a command encoded elsewhere: ``data`` is an envelope's JSON
        (``Envelope.model_dump_json()``, e.g. made in ingress's import worker process), ``msg_id``
        its ``dedupe_id``, ``cmd_id`` its ``cmd_id``. Same result and errors as ``publish``."""
        return await self._publish(op, data, {MSG_ID_HEADER: msg_id}, cmd_id, 1, timeout_s, lane)

    async def publish_bundle(self, envs: list[Envelope], parts: list[bytes], *,
                             timeout_s: float | None = None) -> PublishResult:
        """Publish fire-and-forget ``envs`` (their JSON ``parts``, same order) as one message on
        ``aimem.mut.bundle`` and wait for its PubAck (``aimem_common.bundles``).

        The message's ``Nats-Msg-Id`` is unique to this bundle: JetStream never reports it as
        a duplicate; the writer applies a command seen before once (``ingest_keys``).

        Raises:
            BackPressureError / UnavailableError: as ``publish``; none of ``envs`` is stored.
        """
        headers = {MSG_ID_HEADER: f"{envs[0].cmd_id}:{BUNDLE_OP}", BUNDLE_HEADER: str(len(envs))}
        return await self._publish(BUNDLE_OP, encode_bundle(parts), headers, envs[0].cmd_id, len(envs), timeout_s)

    async def _publish(self, op: str, data: bytes, headers: dict[str, str], message_id: str, commands: int,
                       timeout_s: float | None, lane: str = LIVE) -> PublishResult:
        """Publish ``data`` on ``lane``'s subject of ``op`` with ``headers`` (+ the trace context)
        and map the PubAck or its failure (see ``publish``)."""
        subject = mut_subject(op, lane)
        timeout = timeout_s if timeout_s is not None else self.settings.publish_timeout_s
        span = nullcontext() if not tracing_enabled() else self._tracer.start_as_current_span(
            f"{subject} publish",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": "nats",
                "messaging.destination.name": subject,
                "messaging.operation.type": "publish",
                "messaging.message.id": message_id,
            },
        )
        with span:  # without an exporter: no span, the caller's trace context still travels
            headers = trace_headers(headers)
            t0 = time.perf_counter()
            try:
                ack = await self.acks.publish(subject, data, headers=headers, timeout_s=timeout)
            except nats.js.errors.APIError as exc:
                if exc.err_code in _FULL_ERR_CODES or "maximum" in (exc.description or "").lower():
                    raise BackPressureError(
                        "command stream is full; retry later", retry_after_s=2, data={"stream": LANES[lane][0]}
                    ) from exc
                raise UnavailableError(f"JetStream refused the command: {exc.description}", code="bus_error") from exc
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, asyncio.TimeoutError) as exc:
                self.publish_failed_at = time.monotonic()
                raise UnavailableError("JetStream did not acknowledge in time", code="bus_timeout") from exc
            except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError, OSError) as exc:
                raise UnavailableError(f"NATS connection unavailable: {exc}", code="nats_unavailable") from exc
            except nats.js.errors.NoStreamResponseError as exc:
                # A clustered stream between leaders (its leader's server just died) answers
                # with an empty reply; not acknowledged, and a retry with the same Nats-Msg-Id is deduplicated.
                raise UnavailableError("the command stream is electing a leader; retry shortly",
                                       code="bus_unavailable") from exc
            finally:
                self._publish_latency.labels(op).observe(time.perf_counter() - t0)
            self._message_commands.observe(commands)
            self.publish_ok_at = time.monotonic()
            return PublishResult(seq=int(ack.get("seq") or 0), duplicate=bool(ack.get("duplicate")))

    def jetstream_storing(self, window_s: float = 30.0) -> bool:
        """Return False while the last publish (within ``window_s``) got no PubAck and none since.

        A JetStream whose store failed (disk full) keeps accepting connections and API calls
        but never acknowledges a publish: this is the one symptom a client sees.
        """
        failed = self.publish_failed_at
        return not (failed > self.publish_ok_at and time.monotonic() - failed < window_s)

    async def request(self, env: Envelope, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Publish ``env`` and wait for the writer's reply; return its ``result`` dict.

        Raises:
            BusTimeoutError: no reply within ``timeout_s`` (the command may still apply).
            AimemError subclass: the writer answered ``ok: false`` (typed from its code).
            BackPressureError / UnavailableError: as ``publish``.
        """
        timeout = timeout_s if timeout_s is not None else self.settings.request_timeout_s
        inbox = self.nc.new_inbox()
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        async def on_reply(msg) -> None:
            if not fut.done():
                fut.set_result(msg.data)

        sub = await self.nc.subscribe(inbox, cb=on_reply, max_msgs=1)
        t0 = time.perf_counter()
        try:
            await self.publish(env, reply_to=inbox)
            try:
                raw = await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError as exc:
                raise BusTimeoutError(
                    f"the writer did not answer {env.op} within {timeout:g} s; it may still apply",
                    data={"cmd_id": env.cmd_id},
                ) from exc
        finally:
            self._request_latency.labels(env.op).observe(time.perf_counter() - t0)
            try:
                await sub.unsubscribe()
            except nats.errors.Error:
                pass
        return parse_reply(raw)

    async def writer_lag(self, lane: str = LIVE) -> int:
        """Return the pending count of the writer's consumer of ``lane`` (commands not yet
        delivered + unacked).

        Raises:
            UnavailableError: consumer info cannot be read.
        """
        return (await self.writer_progress(lane)).pending

    async def writer_progress(self, lane: str = LIVE) -> WriterProgress:
        """Return the pending count and the ack floor of the writer's consumer of ``lane`` (one
        ``consumer_info``): ``writer`` (live) or ``writer-bulk`` (imports).

        A missing consumer (the writer never started) reads as nothing pending.

        Raises:
            UnavailableError: consumer info cannot be read.
        """
        stream, durable, _ = LANES[lane]
        try:
            info = await self.js.consumer_info(stream, durable, timeout=1.0)
        except nats.js.errors.NotFoundError:
            return WriterProgress(0, 0)
        except Exception as exc:
            raise UnavailableError(f"cannot read consumer info: {exc}", code="bus_error") from exc
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        return WriterProgress(int(info.num_pending or 0) + int(info.num_ack_pending or 0), int(floor or 0))


@dataclass(slots=True, frozen=True)
class WriterProgress:
    """A ``writer`` consumer sample: commands not yet applied, and the acked stream sequence."""

    pending: int
    acked_seq: int

