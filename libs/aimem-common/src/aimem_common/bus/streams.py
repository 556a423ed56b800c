"""Connecting to NATS and provisioning the streams and the writer's durables, explicitly."""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlparse

import nats
import nats.errors
import nats.js.errors
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

from aimem_common.bus.subjects import (
    BULK_STREAM,
    BULK_SUBJECTS,
    EVT_STREAM,
    EVT_SUBJECTS,
    LANES,
    LIVE,
    MUT_STREAM,
    MUT_SUBJECTS,
)
from aimem_common.config import BusSettings, ConfigError
from aimem_common.errors import UnavailableError

log = logging.getLogger("aimem.bus")


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


def _work_queue(name: str, subjects: str, max_bytes: int, settings: BusSettings) -> StreamConfig:
    """A command lane's stream: file storage, WorkQueue retention, ``discard=new`` (a full lane
    is back-pressure), the dedupe window and replicas of ``settings`` (``bus``)."""
    return StreamConfig(
        name=name,
        subjects=[subjects],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        max_bytes=max_bytes,
        max_msg_size=settings.mut_max_msg_bytes,
        discard=DiscardPolicy.NEW,
        duplicate_window=float(settings.duplicate_window_s),
        num_replicas=settings.stream_replicas,
    )


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
    mut = _work_queue(MUT_STREAM, MUT_SUBJECTS, settings.mut_max_bytes, settings)
    bulk = _work_queue(BULK_STREAM, BULK_SUBJECTS, settings.bulk_max_bytes, settings)
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

