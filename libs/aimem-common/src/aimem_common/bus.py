"""NATS JetStream: streams, publishing with dedupe, request/reply to the writer, events.

Contract (DESIGN.md "The bus"):

* ``AIMEM_MUT`` (subjects ``aimem.mut.>``): file storage, WorkQueue retention, bounded
  ``max_bytes`` with ``discard=new`` (a full stream is back-pressure), 2-minute dedupe.
* ``AIMEM_BULK`` (subjects ``aimem.bulk.>``): the bulk lane (``aimem import``), the same
  settings with its own ``bulk_max_bytes``; the writer's second durable, ``writer-bulk``,
  takes from it only what the live lane leaves room for ("Live first").
* ``AIMEM_EVT`` (``aimem.evt.>``): limits retention, what the writer committed.
* Headers: ``Nats-Msg-Id`` (dedupe), W3C ``traceparent``, ``Aimem-Reply-To`` (the caller's
  inbox when it waits for the writer's ``{cmd_id, ok, result|error}`` reply).
* Streams and the ``writer`` and ``writer-bulk`` consumers are provisioned explicitly
  (``ensure_streams``, ``ensure_writer_consumer``), never implicitly by a subscribe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import nats
import nats.errors
import nats.js.api
import nats.js.errors
import orjson
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Histogram

from aimem_common.config import BusSettings, ConfigError
from aimem_common.errors import (
    AimemError,
    BackPressureError,
    BusTimeoutError,
    UnavailableError,
    from_dict,
)
from aimem_common.bundles import BUNDLE_HEADER, BUNDLE_OP, encode_bundle
from aimem_common.commands import Envelope
from aimem_common.telemetry import tracing_enabled

log = logging.getLogger("aimem.bus")

MUT_STREAM = "AIMEM_MUT"
EVT_STREAM = "AIMEM_EVT"
MUT_SUBJECTS = "aimem.mut.>"
EVT_SUBJECTS = "aimem.evt.>"
WRITER_DURABLE = "writer"
# The bulk lane: its own stream (a WorkQueue stream takes one consumer per subject, and
# ``aimem.mut.>`` already has the live one), so its back-pressure and lag are its own.
BULK_STREAM = "AIMEM_BULK"
BULK_SUBJECTS = "aimem.bulk.>"
BULK_DURABLE = "writer-bulk"
LIVE, BULK = "live", "bulk"  # the lanes: (stream, durable, subject prefix) in LANES
LANES = {LIVE: (MUT_STREAM, WRITER_DURABLE, "aimem.mut"), BULK: (BULK_STREAM, BULK_DURABLE, "aimem.bulk")}
# Core NATS (not JetStream): the writer announces whether it can store, about once a second.
WRITER_STATUS_SUBJECT = "aimem.status.writer"
REPLY_HEADER = "Aimem-Reply-To"
MSG_ID_HEADER = "Nats-Msg-Id"
# A dead-letter replay names the row it sends again (its id): when the command fails again,
# the writer keeps a new open dead letter instead of updating that row, which the replay's
# ``dead_letter.resolve`` is about to mark replayed (the failure would vanish with it).
REPLAY_HEADER = "Aimem-Replay-Of"

# JetStream err_codes that mean "the stream is full" (discard=new).
_FULL_ERR_CODES = {10077, 10047, 10028}


def mut_subject(op: str, lane: str = LIVE) -> str:
    """Return the subject of a mutation op in ``lane``, e.g. ``aimem.mut.page.write`` (live) or
    ``aimem.bulk.observation.append`` (bulk)."""
    return f"{LANES[lane][2]}.{op}"


def evt_subject(kind: str) -> str:
    """Return the subject of an event, e.g. ``aimem.evt.session.ended``."""
    return f"aimem.evt.{kind}"


async def connect(settings: BusSettings, *, name: str, reconnect: bool = True) -> NATS:
    """Connect to NATS: any of ``settings.nats_urls`` (one server or a cluster's members).

    nats-py fails over between the listed servers (and the ones a cluster announces) on its
    own. ``reconnect=False`` for one-shot tools and tests (a refused connect fails at once).

    Raises:
        UnavailableError: no listed server can be reached within ``connect_timeout_s``.
    """

    async def _quiet(exc: Exception) -> None:  # nats-py logs tracebacks by default
        log.warning("nats: %s", exc)

    urls = settings.nats_urls
    # nats-py keeps retrying a refused *initial* connect on its own; probe TCP first so an
    # absent server (every member of a cluster absent) is a prompt, typed error.
    reachable = [u for u, ok in zip(urls, await asyncio.gather(*(_probe(u, settings.connect_timeout_s) for u in urls))) if ok]
    if not reachable:
        raise UnavailableError(f"cannot connect to NATS at {settings.nats_url}", code="nats_unavailable")
    try:
        return await asyncio.wait_for(
            nats.connect(
                urls,  # nats-py spreads clients over them and fails over between them
                name=name,
                token=settings.token,
                connect_timeout=settings.connect_timeout_s,
                allow_reconnect=reconnect,
                max_reconnect_attempts=-1 if reconnect else 0,
                reconnect_time_wait=0.5,
                error_cb=_quiet,
            ),
            settings.connect_timeout_s * 2 + 1,
        )
    except Exception as exc:  # nats raises OSError/NoServersError/TimeoutError
        raise UnavailableError(f"cannot connect to NATS at {settings.nats_url}: {exc}", code="nats_unavailable") from exc


# err_code when a stream's limits do not fit the JetStream store (its disk).
_INSUFFICIENT_RESOURCES = 10047
_STREAM_NAME_IN_USE = 10058  # "stream name already in use with a different configuration"
MIN_STREAM_BYTES = 4 * 1024 * 1024  # below this a stream is useless: a clear error instead


async def _probe(url: str, timeout_s: float) -> bool:
    """Return True when ``url``'s host:port accepts a TCP connection within ``timeout_s``."""
    parsed = urlparse(url)
    try:
        _, w = await asyncio.wait_for(asyncio.open_connection(parsed.hostname or "127.0.0.1", parsed.port or 4222), timeout_s)
        w.close()
        return True
    except (OSError, asyncio.TimeoutError):
        return False


async def ensure_streams(js: JetStreamContext, settings: BusSettings) -> None:
    """Create or update ``AIMEM_MUT``, ``AIMEM_BULK`` and ``AIMEM_EVT`` with the DESIGN.md settings.

    Both get ``settings.stream_replicas`` replicas (R3 on a three-server cluster: a PubAck
    then means a majority of the servers stored the command). The ``writer`` consumer
    inherits the stream's replica count.

    Stream limits fit the store they live on: when JetStream refuses a ``max_bytes`` as more
    than its store can hold (a small disk), the limit is halved until it fits and halved once
    more (room for the other stream and the KV buckets), with one warning naming the
    configured and the clamped size. An existing stream whose configured limit no longer
    fits keeps its current one (warning), and never drops to fewer replicas.

    Raises:
        ConfigError: even ``MIN_STREAM_BYTES`` does not fit (the supervisor does not restart).
    """
    mut = StreamConfig(
        name=MUT_STREAM,
        subjects=[MUT_SUBJECTS],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_bytes=settings.mut_max_bytes,
        max_msg_size=settings.mut_max_msg_bytes,
        discard=DiscardPolicy.NEW,
        duplicate_window=float(settings.duplicate_window_s),
        num_replicas=settings.stream_replicas,
    )
    bulk = StreamConfig(
        name=BULK_STREAM,
        subjects=[BULK_SUBJECTS],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_bytes=settings.bulk_max_bytes,
        max_msg_size=settings.mut_max_msg_bytes,
        discard=DiscardPolicy.NEW,
        duplicate_window=float(settings.duplicate_window_s),
        num_replicas=settings.stream_replicas,
    )
    evt = StreamConfig(
        name=EVT_STREAM,
        subjects=[EVT_SUBJECTS],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_bytes=settings.evt_max_bytes,
        max_age=float(settings.evt_max_age_s),
        discard=DiscardPolicy.OLD,
        duplicate_window=float(settings.duplicate_window_s),
        num_replicas=settings.stream_replicas,
    )
    for cfg in (mut, bulk, evt):
        await _ensure_stream_fitting(js, cfg)


async def _ensure_stream_fitting(js: JetStreamContext, cfg: StreamConfig) -> None:
    try:
        info = await js.stream_info(cfg.name)
    except nats.js.errors.NotFoundError:
        pass
    else:
        # Exists with other limits: converge, but never to fewer replicas (one service
        # started with a single-server config must not strip a cluster's redundancy).
        current = info.config.num_replicas or 1
        if current > (cfg.num_replicas or 1):
            log.warning("stream %s keeps %d replicas (this service asked for %d)", cfg.name, current,
                        cfg.num_replicas)
            cfg.num_replicas = current
        try:
            await js.update_stream(cfg)
        except nats.js.errors.APIError as exc:
            if exc.err_code != _INSUFFICIENT_RESOURCES:
                raise
            # Sized to the store when it was created (maybe by a sibling service just now).
            log.warning("stream %s keeps its current limits: max_bytes %d does not fit the JetStream store",
                        cfg.name, cfg.max_bytes)
        return
    wanted = cfg.max_bytes
    while True:
        try:
            await js.add_stream(cfg)
        except nats.js.errors.APIError as exc:
            if exc.err_code == _STREAM_NAME_IN_USE:
                return  # a sibling service created it meanwhile (sized to the store)
            if exc.err_code != _INSUFFICIENT_RESOURCES:
                raise
            if cfg.max_bytes is None or cfg.max_bytes <= MIN_STREAM_BYTES:
                raise ConfigError(
                    f"JetStream has no room for stream {cfg.name} (even {MIN_STREAM_BYTES} bytes): "
                    f"free space on the NATS store's disk or lower bus limits ({exc.description})"
                ) from exc
            cfg.max_bytes = max(MIN_STREAM_BYTES, cfg.max_bytes // 2)
            if cfg.max_msg_size and cfg.max_msg_size > cfg.max_bytes:
                cfg.max_msg_size = cfg.max_bytes
            continue
        if cfg.max_bytes != wanted:
            # Half of what fits: the store needs room for the other stream and the KV buckets.
            cfg.max_bytes = max(MIN_STREAM_BYTES, cfg.max_bytes // 2)
            await js.update_stream(cfg)
            log.warning("stream %s: max_bytes clamped from %d to %d bytes to fit the JetStream store's disk",
                        cfg.name, wanted, cfg.max_bytes)
        return


async def ensure_streams_when_ready(js: JetStreamContext, settings: BusSettings, *, deadline_s: float) -> None:
    """``ensure_streams``, retried while JetStream is not ready (a cluster still electing
    its meta leader answers 503 or not at all for the first seconds).

    Raises:
        UnavailableError: JetStream still not ready after ``deadline_s`` seconds.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            await ensure_streams(js, settings)
            return
        except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError, nats.errors.NoRespondersError,
                asyncio.TimeoutError) as exc:
            if time.monotonic() >= deadline:
                raise UnavailableError(f"JetStream not ready: {exc}", code="nats_unavailable") from exc
            log.info("JetStream not ready (%s); retrying", type(exc).__name__)
            await asyncio.sleep(0.5)


def writer_consumer_config(*, ack_wait_s: float, lane: str = LIVE) -> ConsumerConfig:
    """Return the config of the writer's durable of ``lane`` (``writer`` or ``writer-bulk``:
    explicit ack, unlimited deliveries, the lane's whole stream).

    ``max_deliver`` is -1 on purpose: the server must never stop redelivering a command on
    its own (a store fault can last longer than any fixed count). The writer decides when a
    command is given up and keeps it as a dead letter (``writer.max_deliver``).
    """
    _, durable, prefix = LANES[lane]
    return ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=float(ack_wait_s),
        max_deliver=-1,
        max_ack_pending=20_000,
        filter_subject=f"{prefix}.>",
    )


async def ensure_writer_consumer(js: JetStreamContext, *, ack_wait_s: float) -> None:
    """Create the writer's durable pull consumers, ``writer`` on ``AIMEM_MUT`` and
    ``writer-bulk`` on ``AIMEM_BULK``, or converge them.

    An existing durable with other settings (an older ``ack_wait`` or a bounded
    ``max_deliver``) is updated in place; its pending and in-flight messages stay.
    """
    for lane, (stream, durable, _) in LANES.items():
        cfg = writer_consumer_config(ack_wait_s=ack_wait_s, lane=lane)
        try:
            await js.add_consumer(stream, cfg)
        except nats.js.errors.BadRequestError:
            info = await js.consumer_info(stream, durable)
            cur = info.config
            cur.ack_wait = cfg.ack_wait
            cur.max_deliver = cfg.max_deliver
            await js.update_consumer(stream, cur)


def trace_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``headers`` plus the current W3C trace context (``traceparent``)."""
    out = dict(headers or {})
    propagate.inject(out)
    return out


def extract_context(headers: dict[str, str] | None):
    """Return the OTel context carried in message headers (for a child span)."""
    return propagate.extract(headers or {})


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


def reply_body(cmd_id: str | None = None, *, result: dict[str, Any] | None = None,
               error: AimemError | None = None) -> dict[str, Any]:
    """The one reply shape of the bus: ``{cmd_id?, ok: true, result}`` or ``{cmd_id?, ok: false, error}``.

    The writer answers commands with it (``cmd_id`` set; the writer also stores it for
    idempotent re-sends) and the maintainer answers job requests (no ``cmd_id``). ``error``
    is ``AimemError.to_dict()`` plus its HTTP ``status``, so a custom code (e.g.
    ``invalid_name``) keeps its status on the far side.
    """
    head: dict[str, Any] = {} if cmd_id is None else {"cmd_id": cmd_id}
    if error is not None:
        return {**head, "ok": False, "error": {**error.to_dict(), "status": error.status}}
    return {**head, "ok": True, "result": result or {}}


def make_reply(cmd_id: str | None = None, *, result: dict[str, Any] | None = None,
               error: AimemError | None = None) -> bytes:
    """``reply_body`` as JSON bytes, ready to publish."""
    return json.dumps(reply_body(cmd_id, result=result, error=error), ensure_ascii=False).encode()


def parse_reply(raw: bytes, sender: str = "writer") -> dict[str, Any]:
    """Decode a reply (``reply_body``): return ``result`` or raise the typed error it carries."""
    msg = json.loads(raw)
    if msg.get("ok"):
        return msg.get("result") or {}
    raise from_dict(msg.get("error") or {"code": "internal", "message": f"{sender} error without detail"})
