"""NATS JetStream: streams, publishing with dedupe, request/reply to the writer, events.

The package's parts, one job each: ``subjects`` (names: streams, subjects, durables, lanes,
headers), ``codec`` (reply shape, trace headers, bundle body), ``streams`` (connect, provision
streams and the writer's durables), ``publish`` (``Bus``: publishes with PubAcks, request/reply,
the writer's lag per lane). Ingress batching (``aimem_common.bundles``) sits above the bus and
imports it; the bus never imports it. The names below are the bus's public interface.

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

from aimem_common.bus.codec import (
    BUNDLE_HEADER,
    BUNDLE_OP,
    BUNDLE_VERSION,
    BUNDLES_STATUS_KEY,
    encode_bundle,
    extract_context,
    make_reply,
    parse_reply,
    reply_body,
    split_bundle,
    trace_headers,
)
from aimem_common.bus.publish import Bus, PublishResult, PubAcks, WriterProgress
from aimem_common.bus.streams import (
    MIN_STREAM_BYTES,
    connect,
    ensure_streams,
    ensure_streams_when_ready,
    ensure_writer_consumer,
    writer_consumer_config,
)
from aimem_common.bus.subjects import (
    BULK,
    BULK_DURABLE,
    BULK_STREAM,
    BULK_SUBJECTS,
    EVT_STREAM,
    EVT_SUBJECTS,
    LANES,
    LIVE,
    MSG_ID_HEADER,
    MUT_STREAM,
    MUT_SUBJECTS,
    REPLAY_HEADER,
    REPLY_HEADER,
    WRITER_DURABLE,
    WRITER_STATUS_SUBJECT,
    evt_subject,
    mut_subject,
)

__all__ = [
    "BULK", "BULK_DURABLE", "BULK_STREAM", "BULK_SUBJECTS", "BUNDLES_STATUS_KEY", "BUNDLE_HEADER", "BUNDLE_OP",
    "BUNDLE_VERSION", "Bus", "EVT_STREAM", "EVT_SUBJECTS", "LANES", "LIVE", "MIN_STREAM_BYTES", "MSG_ID_HEADER",
    "MUT_STREAM", "MUT_SUBJECTS", "PubAcks", "PublishResult", "REPLAY_HEADER", "REPLY_HEADER", "WRITER_DURABLE",
    "WRITER_STATUS_SUBJECT", "WriterProgress", "connect", "encode_bundle", "ensure_streams",
    "ensure_streams_when_ready", "ensure_writer_consumer", "evt_subject", "extract_context", "make_reply",
    "mut_subject", "parse_reply", "reply_body", "split_bundle", "trace_headers", "writer_consumer_config",
]
