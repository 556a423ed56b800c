"""Sections of the path a command and a read take.

``[bus]``, ``[writer]``, ``[ingress]``, ``[query]``, ``[search]``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class BusSettings(BaseModel):
    """NATS JetStream connection and stream limits (DESIGN.md "The bus").

    ``nats_url`` takes one URL or several separated by commas (the members of a JetStream
    cluster: the client connects to any and fails over to the others). ``stream_replicas``
    is the replica count the streams are created with: 1 on a single server, 3 on a cluster
    (a stream survives the loss of one of its three servers).
    """

    nats_url: str = "nats://127.0.0.1:4222"
    # The NATS server's client token. Unset: the root token (auth.token or the token file),
    # which is what the nats-server of `aimem up` requires; a server without authorization
    # accepts any. A read replica sets it to the primary's token.
    token: str | None = None
    stream_replicas: int = Field(1, ge=1, le=5)
    connect_timeout_s: float = 2.0
    mut_max_bytes: int = 1024 * 1024 * 1024  # AIMEM_MUT cap; full stream = 429 back-pressure
    bulk_max_bytes: int = 256 * 1024 * 1024  # AIMEM_BULK cap (imports); full = 429 to the importer only
    mut_max_msg_bytes: int = 8 * 1024 * 1024  # ≤ the server's max_payload (8 MiB in aimem up)
    evt_max_bytes: int = 256 * 1024 * 1024
    evt_max_age_s: int = 7 * 24 * 3600
    duplicate_window_s: int = 120
    publish_timeout_s: float = 0.8  # PubAck wait; ingress must answer within ~1 s
    request_timeout_s: float = 10.0  # default wait for a writer reply

    @property
    def nats_urls(self) -> list[str]:
        """The configured server URLs, in order (``nats_url`` split on commas)."""
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]


class WriterSettings(BaseModel):
    """Writer consumer and checkpoint tuning."""

    batch_max_msgs: int = 512  # commands per fetch (= per transaction) when the writer keeps up
    batch_max_msgs_behind: int = 4096  # ... when the consumer still has commands pending after a fetch
    # (a bundle counts its commands; a batch passes these by at most the rest of the bundle
    # that crosses them, aimem_writer.messages.split_batch)
    fetch_timeout_s: float = 0.25
    # A batch smaller than batch_linger_msgs that nobody waits on (hook observations) waits up
    # to batch_linger_ms for more commands before it is applied: fewer, larger transactions
    # when hooks trickle in (0 = apply each fetch at once).
    batch_linger_ms: float = 50.0
    batch_linger_msgs: int = 64
    # Live first: commands of the bulk lane (imports) join a batch only while the live lane has
    # nothing pending, in slices sized to apply in about bulk_slice_ms (from the measured cost
    # of a command) and at most bulk_batch_max_msgs, so a live command that arrives meanwhile
    # waits behind at most the slice being applied and the one fetched.
    bulk_batch_max_msgs: int = 512
    bulk_slice_ms: float = 100.0
    # A message unacked this long is redelivered (a killed writer's batch comes back this
    # fast); a long apply sends in-progress acks every ack_wait_s/3 so it is not.
    ack_wait_s: float = 5.0
    # Deliveries of a command failing with a transient, non-store error before it becomes a
    # dead letter. Store faults (disk full, I/O) never count: the batch is held and retried.
    # Also the attempts, ~1 s apart, of a batch whose apply fails unexpectedly, retried in
    # place before it goes one command at a time (aimem_writer.inplace); a command handed
    # back after failing alone is tried alone at once when it returns.
    max_deliver: int = 5
    store_retry_max_s: float = 5.0  # backoff ceiling between retries of a batch on a store fault
    status_interval_s: float = 1.0  # how often the writer announces its store state to ingress
    git_debounce_ms: int = 500  # a checkpoint waits this long to absorb more batches
    watch_wiki: bool = True  # reindex pages edited by hand (watchdog)
    max_page_bytes: int = 256 * 1024


class IngressSettings(BaseModel):
    """Hook ingress limits (DESIGN.md "Hook ingress")."""

    max_body_bytes: int = 10 * 1024 * 1024
    max_json_depth: int = 64
    max_writer_lag: int = 100_000  # pending messages before ingress answers 429 (a bundle of hooks counts once)
    # Time bound: 429 once the writer is this many seconds behind (pending commands / its
    # measured apply rate, or how long it has made no progress with work pending).
    max_writer_delay_s: float = 15.0
    # The bulk lane's own bound (POST /hook/import): 429 to the importer, which retries, once the
    # writer has this many seconds of imports in front of it. Live hooks never see it.
    max_import_delay_s: float = 10.0
    lag_check_interval_s: float = 1.0  # ingress reads the writer's progress on its own clock
    writer_status_stale_s: float = 5.0  # a store-fault announcement older than this is ignored
    retry_after_s: int = 2
    context_max_tokens: int = 2000  # session-start context budget (~4 chars/token)
    workers: int = Field(1, ge=1, le=64)  # uvicorn worker processes (ingress is stateless)
    # Hooks publishing at the same moment share one JetStream message and PubAck
    # (aimem_common.bundles): at most this many per message (1: every hook alone), and new
    # hooks gather while this many messages await their PubAck.
    bundle_max_cmds: int = Field(64, ge=1, le=1024)
    bundle_max_inflight: int = Field(2, ge=1, le=64)


class QuerySettings(BaseModel):
    """Read-side knobs."""

    default_limit: int = 10
    max_limit: int = Field(100, ge=1, le=100)  # a search's `limit` is clamped to this (the API caps it at 100)
    snippet_words: int = 24
    access_bump_interval_s: int = 60
    read_pool_size: int = 4  # read-only SQLite connections per process (= concurrent reads)
    query_budget_ms: int = 5000  # a read past this is interrupted (503 query_timeout)
    read_reopen: bool = False  # one SQLite connection per read (set by `aimem replica`: follow-mode copies)
    # /web/status sparklines: sample ingress/writer /metrics and the writer lag this often into a
    # one-hour in-memory ring; or read the same series from Prometheus at this URL (no sampling)
    health_sample_s: float = Field(10.0, ge=1.0, le=300.0)
    prometheus_url: str | None = None


class SearchSettings(BaseModel):
    # The page text index (tantivy, <data_dir>/search): the fts stream of memory_query uses it
    # once the writer has built it; False = the writer keeps none and searches use FTS5.
    text_index: bool = True
