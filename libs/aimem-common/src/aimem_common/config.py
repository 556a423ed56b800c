"""The one config-read path (DESIGN.md invariant 1).

``load()`` resolves, in order of precedence: environment ``AIMEM_*`` (nested sections with
``__``, e.g. ``AIMEM_DECAY__LAMBDA=0.05``) > ``<data_dir>/config.toml`` > defaults. The
sections are those of ``config.toml`` (README "Configuration"). Call it
once per process, in ``main()``/``create_app()``, and pass the ``Settings`` object down; no
other module reads ``os.environ``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from aimem_common.errors import ConfigError

log = logging.getLogger("aimem.config")

DEFAULT_PORT_BASE = 8701
SERVICES = ("ingress", "query", "mcp-gateway", "writer", "maintainer")
# Port offsets from port_base, in the order of DESIGN.md "Ports and endpoints".
PORT_OFFSETS = {"ingress": 0, "query": 1, "mcp-gateway": 2, "writer": 3, "maintainer": 4}
# Service name -> its Python package (`python -m <package>` runs it), in start order: the
# writer first, because it migrates the DB the readers wait for.
SERVICE_MODULES = {
    "writer": "aimem_writer",
    "ingress": "aimem_ingress",
    "query": "aimem_query",
    "mcp-gateway": "aimem_mcp",
    "maintainer": "aimem_maintainer",
}


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


AdmissionOperation = Literal[
    "delete_page", "purge_session", "purge_project", "purge_workspace", "move_project", "move_session",
    "delete_ledger"]


class AdmissionWebhook(BaseModel):
    """One ``[[admission.webhooks]]`` entry (``aimem_common.admission``): asked before each of
    its ``operations`` (default: all); ``on_failure`` decides when it cannot answer in time."""

    url: str
    operations: list[AdmissionOperation] = list(AdmissionOperation.__args__)  # type: ignore[attr-defined]
    timeout_s: float = Field(2.0, gt=0, le=30)
    on_failure: Literal["reject", "allow"] = "reject"
    headers: dict[str, str] = {}


class AdmissionSettings(BaseModel):
    """Webhooks called, in declaration order, before a destructive operation reaches the writer."""

    webhooks: list[AdmissionWebhook] = []


class MirrorSettings(BaseModel):
    """One ``[[mirrors]]`` receiver: every committed change (an ``aimem.evt.*`` event whose kind
    matches ``events``, fnmatch patterns; empty = every kind but ``observations.appended``) is
    POSTed to ``url`` as signed JSON by the maintainer (``aimem_maintainer.mirrors``)."""

    url: str
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,40}$")  # durable consumer suffix
    secret: str | None = None  # HMAC-SHA256 key; or `secret_env`, the env var holding it
    secret_env: str | None = None
    events: list[str] = []
    timeout_s: float = Field(5.0, gt=0, le=60)
    max_backoff_s: float = Field(300.0, ge=1)


class ReplicationSettings(BaseModel):
    """Off-node copies: the wiki pushed to a git remote, the DB streamed by Litestream.

    Empty ``git_remote`` = no push; empty ``s3_bucket`` = no Litestream (``aimem up`` then
    starts none). The S3 keys are read from the standard ``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY`` environment by Litestream itself, never stored here.
    """

    git_remote: str = ""  # any git URL: a bare repo path, ssh://, https:// (credentials via git)
    git_branch: str = "main"
    git_push_retry_max_s: float = 60.0  # backoff ceiling between failed pushes
    s3_bucket: str = ""
    s3_path: str = "aimem/db"
    s3_endpoint: str = ""  # MinIO, Garage, R2, moto: http(s)://host:port; empty = AWS
    s3_region: str = "us-east-1"
    s3_force_path_style: bool = True
    sync_interval_s: float = 1.0  # Litestream's WAL upload period (= the DB's RPO when healthy)
    litestream_socket: str = ""  # control socket the writer polls for the last sync; "" = <data_dir>/db/litestream.sock
    lag_poll_s: float = 5.0
    lag_alert_s: float = 300.0  # replication lag above this is "behind" (status, alert rule)


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


class DecaySettings(BaseModel):
    """Forget-sweep parameters, ``[decay]`` in config.toml (DESIGN.md "Decay")."""

    model_config = {"populate_by_name": True}

    lambda_: float = Field(0.02, alias="lambda")
    sigma: float = 0.6
    mu: float = 0.04
    cold_threshold: float = 0.20
    hard_delete_after_days: int = 180
    breadth_weight: float = 0.0
    observation_retention_days: int = 0
    observation_prune_batch: int = 5000
    salience_default: float = 1.0
    # Monthly hook ledgers (wiki/<ws>/<project>/log-YYYY-MM.md) older than this many months
    # are deleted by the sweep; 0 keeps them all. The current and previous month are never.
    ledger_retention_months: int = Field(0, ge=0, le=1200)


class MaintenanceSettings(BaseModel):
    """Schedules of the maintainer's background jobs."""

    sweep_interval_s: int = 6 * 3600
    lint_interval_s: int = 24 * 3600
    embed_interval_s: int = 600
    consolidation_poll_s: float = 5.0
    lease_ttl_s: int = 300
    # A session with no event for this long is finalised through the session-end path
    # (agents killed without a session end: Ctrl-C, a crash, a closed terminal).
    session_idle_after_s: float = Field(3600.0, gt=0)
    idle_check_interval_s: float = Field(300.0, gt=0)


def _refuse_unsupported(section: str, data: Any, accepted: dict[str, Any]) -> Any:
    """Refuse a key this version reads nowhere (a setting must have an effect or fail load).

    ``accepted`` maps each such key to the one value that matches what this version does
    (``...``: none does); that value is accepted and dropped, any other fails the load.
    """
    if not isinstance(data, dict):
        return data
    for key, ok in accepted.items():
        if key in data:
            value = data[key]
            if ok is not ... and _same(value, ok):
                data = {k: v for k, v in data.items() if k != key}
                continue
            raise ValueError(
                f"[{section}] {key} = {value!r} is not supported by this version of aimem "
                f"(nothing reads it); remove it from config.toml / the AIMEM_{section.upper()}__"
                f"{key.upper()} environment"
            )
    return data


def _same(value: Any, ok: Any) -> bool:
    if isinstance(ok, bool) and isinstance(value, str):  # from the environment
        return value.strip().lower() in (("false", "0", "no", "off") if not ok else ("true", "1", "yes", "on"))
    return value == ok


class SlotSettings(BaseModel):
    """``[slots]``: the original's ``per_user = true`` (each operator's own slots in its agents'
    context) is not implemented; ``false`` is what this version does and is accepted."""

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        return _refuse_unsupported("slots", data, {"per_user": False})


class ConsolidationSettings(BaseModel):
    enabled: bool = True  # runs only when an LLM provider is configured
    max_input_tokens: int = Field(100_000, ge=6000)
    max_output_tokens: int = Field(32_000, ge=1000)
    related_pages: int = 8
    max_attempts: int = 4
    retry_base_s: float = 30.0  # backoff after a failed attempt: base·2^(attempts−1), ≤ 1 h


class AutoImproveScheduler(BaseModel):
    enabled: bool = True
    interval_secs: int = 3600
    max_sessions_per_tick: int = 1
    min_session_age_secs: int = 600


class AutoImproveEval(BaseModel):
    """The executable gate of auto-improve (``[auto_improve.eval]``): run by the maintainer
    only, never on a hook path, for proposals whose path starts with one of ``prefixes``."""

    enabled: bool = False
    command: list[str] = Field(default_factory=list)  # argv; the proposal JSON arrives on stdin
    prefixes: list[str] = Field(default_factory=lambda: ["_rules/", "procedures/"])
    timeout_s: float = Field(30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _command(self) -> "AutoImproveEval":
        if self.enabled and not self.command:
            raise ValueError("[auto_improve.eval] enabled needs command = [\"executable\", ...]")
        return self


class AutoImproveSettings(BaseModel):
    require_approval: bool = False
    min_observations: int = 8
    min_session_duration_secs: int = 120
    min_confidence: float = 0.75
    max_input_tokens: int = 24_000
    max_proposals_per_run: int = 5  # pages one review may patch
    max_edits_per_proposal: int = Field(8, ge=1, le=100)  # edits over all pages of one review
    max_changed_chars: int = Field(6_000, ge=1)  # removed + added characters over one review
    rejection_context: int = Field(8, ge=0, le=50)  # newest rejected proposals given back to the model
    max_final_body_chars: int = 32_000
    proposal_actor: str = "auto_improve"
    scheduler: AutoImproveScheduler = AutoImproveScheduler()
    eval: AutoImproveEval = AutoImproveEval()

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        # Staged proposals live in the pending_writes table, never under a wiki path.
        return _refuse_unsupported("auto_improve", data, {"pending_path": ...})


class RetrievalSettings(BaseModel):
    """``[retrieval]``. The original's opt-in ``query_intent`` (session-recall routing),
    its ``session_recall_bonus`` and ``abstract_vectors`` (an RRF stream over frontmatter
    abstracts) are not implemented: ``false`` is accepted, anything else fails the load."""

    rrf_k: int = 60
    raw_fallback_limit: int = 10

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        return _refuse_unsupported("retrieval", data, {"query_intent": False, "abstract_vectors": False,
                                                       "session_recall_bonus": ...})


class SearchSettings(BaseModel):
    # The page text index (tantivy, <data_dir>/search): the fts stream of memory_query uses it
    # once the writer has built it; False = the writer keeps none and searches use FTS5.
    text_index: bool = True


class RerankSettings(BaseModel):
    """Optional cross-encoder rerank of a search's top hits (``aimem_common.rerank``); off when
    ``provider`` is None. ``http``: a ``POST <base_url>/rerank`` endpoint (Cohere's shape, also
    vLLM's, Jina's, Infinity's); ``llm``: the maintainer's ``[llm]`` chain ranks them (one
    bounded call per query, ``aimem_common.rerank.LlmReranker``). ``top_n`` hits are reordered
    by its score; past ``timeout_ms`` or on an error the fused order stays, and the reranker
    rests ``cooldown_s``."""

    provider: Literal["http", "llm"] | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    top_n: int = Field(20, ge=2, le=100)  # "llm": at most 30 (LLM_MAX_CANDIDATES)
    timeout_ms: int = 1500
    cooldown_s: float = 10.0


# ``[llm] reasoning_effort``, mapped per provider by the maintainer's llm module: OpenAI's
# ``reasoning_effort``, Anthropic's ``thinking`` budget, Gemini's ``thinking_config`` budget.
ReasoningEffort = Literal["minimal", "low", "medium", "high"]


class LlmCandidate(BaseModel):
    """One LLM provider profile (primary or a ``[[llm_fallbacks]]`` entry)."""

    provider: Literal["openai", "openai-compat", "anthropic", "gemini"]
    model: str
    base_url: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key, never the key
    reasoning_effort: ReasoningEffort | None = None


class LlmSettings(BaseModel):
    """Chat provider for consolidation/auto-improve/explore (zero-LLM when provider is None).

    ``provider``: ``openai`` / ``openai-compat`` (the ``openai`` SDK), ``anthropic`` (Messages
    API, ``anthropic`` SDK) or ``gemini`` (Gemini API, ``google-genai`` SDK)."""

    provider: Literal["openai", "openai-compat", "anthropic", "gemini"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 300.0
    reasoning_effort: ReasoningEffort | None = None
    headers: dict[str, str] = {}
    # False: no response_format=json_schema (endpoints that refuse it); the schema then
    # rides in the system prompt and the answer is still validated against it.
    compat_strict: bool = True
    circuit_cooldown_s: float = 30.0  # a candidate that failed transiently is skipped this long


class EmbeddingSettings(BaseModel):
    """Vector provider; None keeps retrieval FTS/entity/link only."""

    provider: Literal["openai", "openai-compat", "local"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    dim: int | None = None
    batch_size: int = 64
    # Read side (query, mcp-gateway): embedding the question is bounded; past the timeout or
    # on an error the search runs without the vector stream, and the embedder is left alone
    # for the cooldown so a down provider does not add its timeout to every search.
    query_timeout_ms: int = 2000
    query_cooldown_s: float = 10.0


class AuthSettings(BaseModel):
    """Root bearer token (``AIMEM_AUTH__TOKEN`` or ``[auth] token``; else ``load`` reads the
    token file ``aimem up`` generates, ``<data_dir>/auth/token``); None = unauthenticated,
    loopback only."""

    token: str | None = None
    insecure_bind: bool = False


class ServerSettings(BaseModel):
    """HTTP limits every service applies before a route runs (``aimem_common.http.RequestGate``)."""

    # A request body must arrive within this many seconds of its headers, extended by one
    # second per ``body_min_rate_bytes_s`` bytes received (a 2 MiB import over a slow
    # link), never past ``body_read_max_s``; else 408 and the connection is closed: a
    # client that stalls mid-body holds nothing for long.
    body_read_timeout_s: float = Field(5.0, gt=0)
    body_min_rate_bytes_s: int = Field(64 * 1024, gt=0)
    body_read_max_s: float = Field(60.0, gt=0)


class MetricsSettings(BaseModel):
    """Exposure of ``/metrics``, ``/openapi.json`` and ``/docs`` on every service."""

    # True: these need the root credential like any other route (Prometheus then sends
    # ``Authorization: Bearer <token>``); False: open, as a loopback install needs.
    require_token: bool = False


class McpSettings(BaseModel):
    """The mcp-gateway's MCP endpoint at ``/mcp`` (``[mcp]``, env ``AIMEM_MCP__<KEY>``)."""

    # A stateful MCP session with no request for this long is closed; its id then answers 404
    # and the client re-initializes (an ``initialize`` carrying the stale id opens a new one).
    session_idle_timeout_s: float = Field(30 * 60, gt=0, le=7 * 24 * 3600)


class WebSettings(BaseModel):
    """The browser interface at query ``/web`` (``[web]``)."""

    enabled: bool = True
    session_ttl_s: int = Field(12 * 3600, ge=60)  # a login lasts this long, then logs in again
    login_max_failures: int = Field(5, ge=1)  # per user name (×4 per client address) in the window
    login_window_s: int = Field(300, ge=1)
    cookie_secure: bool | None = None  # None: Secure when the request arrived over https
    sse_max_s: int = Field(300, ge=5)  # one live-update stream lasts this long; the browser reconnects


class Settings(BaseSettings):
    """Every setting of every service. Units are in the field names."""

    model_config = SettingsConfigDict(
        env_prefix="AIMEM_",
        env_nested_delimiter="__",
        extra="ignore",
        populate_by_name=True,
    )

    data_dir: Path = Path("data")
    log_level: str = "info"
    # auto: readable text when stderr is a terminal (`aimem up` in a shell), JSON lines otherwise
    # (log files, compose, Kubernetes); text or json forces one. Same fields either way.
    log_format: str = "auto"
    host: str = "127.0.0.1"
    port_base: int = DEFAULT_PORT_BASE
    workspace_default: str = "default"
    # Where the CLI finds the query/admin API and where `aimem hook` posts; unless set, the
    # local stack's ports under port_base (AIMEM_PORT_BASE=9701 → query on 9702).
    server_url: str = "http://127.0.0.1:8702"
    ingress_url: str = "http://127.0.0.1:8701"
    mcp_allowed_hosts: list[str] = ["mcp-gateway", "aimem-mcp-gateway", "localhost", "127.0.0.1"]
    # Host names every service answers (any port): loopback and the compose/Helm service
    # names; add the name a reverse proxy forwards. A request with another Host header (a DNS
    # rebinding page) or a foreign Origin is refused (aimem_common.http.DriveByGuard).
    allowed_hosts: list[str] = ["localhost", "127.0.0.1", "::1", "ingress", "query", "mcp-gateway", "writer",
                                "maintainer", "aimem-ingress", "aimem-query", "aimem-mcp-gateway", "aimem-writer",
                                "aimem-maintainer"]
    otlp_endpoint: str | None = Field(
        None, validation_alias=AliasChoices("AIMEM_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )

    bus: BusSettings = BusSettings()
    writer: WriterSettings = WriterSettings()
    ingress: IngressSettings = IngressSettings()
    query: QuerySettings = QuerySettings()
    decay: DecaySettings = DecaySettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    slots: SlotSettings = SlotSettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    auto_improve: AutoImproveSettings = AutoImproveSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    search: SearchSettings = SearchSettings()
    llm: LlmSettings = LlmSettings()
    llm_fallbacks: list[LlmCandidate] = []
    embedding: EmbeddingSettings = EmbeddingSettings()
    rerank: RerankSettings = RerankSettings()
    auth: AuthSettings = AuthSettings()
    server: ServerSettings = ServerSettings()
    metrics: MetricsSettings = MetricsSettings()
    web: WebSettings = WebSettings()
    mcp: McpSettings = McpSettings()
    replication: ReplicationSettings = ReplicationSettings()
    admission: AdmissionSettings = AdmissionSettings()
    mirrors: list[MirrorSettings] = []

    # Secrets named by `api_key_env` in [[llm_fallbacks]] are resolved once at load.
    resolved_env: dict[str, str] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="after")
    def _local_urls_follow_port_base(self) -> "Settings":
        if "server_url" not in self.model_fields_set:
            self.server_url = f"http://127.0.0.1:{self.port_base + PORT_OFFSETS['query']}"
        if "ingress_url" not in self.model_fields_set:
            self.ingress_url = f"http://127.0.0.1:{self.port_base + PORT_OFFSETS['ingress']}"
        return self

    @field_validator("log_format")
    @classmethod
    def _log_format(cls, v: str) -> str:
        v = v.lower()
        if v not in {"auto", "text", "json"}:
            raise ValueError(f"log_format must be auto|text|json, got {v!r}")
        return v

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        v = v.lower()
        if v not in {"debug", "info", "warning", "error"}:
            raise ValueError(f"log_level must be debug|info|warning|error, got {v!r}")
        return v

    # -- derived paths -------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.data_dir / "db" / "memory.sqlite"

    @property
    def wiki_dir(self) -> Path:
        return self.data_dir / "wiki"

    @property
    def search_dir(self) -> Path:
        """The page text index (derived from the DB; the writer rebuilds it when missing)."""
        return self.data_dir / "search"

    @property
    def litestream_socket(self) -> Path:
        """Litestream's control socket (``replication.litestream_socket`` or under ``db/``)."""
        return Path(self.replication.litestream_socket or self.data_dir / "db" / "litestream.sock")

    @property
    def backups_dir(self) -> Path:
        return self.data_dir / "backups"

    def port(self, service: str) -> int:
        """Return the TCP port of ``service`` (``port_base`` + its DESIGN.md offset)."""
        return self.port_base + PORT_OFFSETS[service]

def load(
    data_dir: str | Path | None = None,
    *,
    environ: dict[str, str] | None = None,
    check_writable: bool = True,
    **overrides: Any,
) -> Settings:
    """Load the settings: env ``AIMEM_*`` > ``<data_dir>/config.toml`` > defaults.

    While an ``aimem up`` runs on the data dir, the port base and NATS URL it was started
    with (``<data_dir>/run/up.json``, ``aimem_common.runstate``) come before ``config.toml``
    (the environment still wins), so every client of the data dir reaches that stack.

    Args:
        data_dir: explicit data dir (a CLI flag); beats ``AIMEM_DATA_DIR``.
        environ: the environment to read (default ``os.environ``; tests pass a dict).
        check_writable: create the data dir and fail fast when it is not writable.
        overrides: highest-precedence values (CLI flags), e.g. ``port_base=9000``.

    Returns the ``Settings`` with ``data_dir`` absolute.

    Raises:
        ConfigError: unwritable data dir, unreadable/invalid config.toml, bad values.
    """
    env = dict(os.environ if environ is None else environ)
    raw_dir = Path(data_dir or env.get("AIMEM_DATA_DIR") or "data").expanduser()
    abs_dir = raw_dir.resolve()
    if check_writable:
        _ensure_writable(abs_dir)
    toml_file = abs_dir / "config.toml"

    toml_source = toml_file if toml_file.is_file() else None

    class _Bound(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            if toml_source is not None:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_source))
            return tuple(sources)

    old_env = None
    if environ is not None:
        # pydantic-settings reads os.environ; swap it for the duration of the parse.
        old_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
    # A running `aimem up` of this data dir may run on ports its command line chose.
    from aimem_common.runstate import running_overrides

    running = {k: v for k, v in running_overrides(abs_dir, env).items() if k not in overrides}
    try:
        settings = _Bound(**{"data_dir": abs_dir, **running, **overrides})
    except Exception as exc:  # pydantic ValidationError or a TOML decode error
        first = str(exc).strip().splitlines()
        raise ConfigError(f"invalid configuration ({toml_file}): {' '.join(first[:3])}") from exc
    finally:
        if old_env is not None:
            os.environ.clear()
            os.environ.update(old_env)
    resolved = {}
    for cand in settings.llm_fallbacks:
        if cand.api_key_env:
            value = env.get(cand.api_key_env)
            if not value:
                raise ConfigError(
                    f"[[llm_fallbacks]] {cand.provider}/{cand.model}: env {cand.api_key_env} is empty"
                )
            resolved[cand.api_key_env] = value
    for mirror in settings.mirrors:
        if mirror.secret_env:
            if not env.get(mirror.secret_env):
                raise ConfigError(f"[[mirrors]] {mirror.url}: env {mirror.secret_env} is empty")
            resolved[mirror.secret_env] = env[mirror.secret_env]
    if settings.llm.provider and not settings.llm.api_key:
        vendor_env = {"anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
        names = (*vendor_env.get(settings.llm.provider, ("OPENAI_API_KEY",)), "LLM_API_KEY")
        key = next((env[n] for n in names if env.get(n)), None)
        if key:
            settings.llm.api_key = key
    settings.resolved_env = resolved
    if settings.auth.token is None:
        settings.auth.token = read_token_file(abs_dir)
    if settings.bus.token is None:
        settings.bus.token = settings.auth.token
    log.info("aimem data dir: %s", abs_dir)
    return settings


def token_path(data_dir: Path) -> Path:
    """``<data_dir>/auth/token``: the root token ``aimem up`` generates when none is configured."""
    return Path(data_dir) / "auth" / "token"


def read_token_file(data_dir: Path) -> str | None:
    """Return the token in ``token_path(data_dir)`` (stripped), or None when absent, empty or
    unreadable (another user's data dir: the server then answers 401, which says why)."""
    try:
        return token_path(data_dir).read_text("utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def ensure_token_file(data_dir: Path) -> tuple[str, bool]:
    """Return ``(token, created)``: the token of ``token_path(data_dir)``, generating it first
    when absent (32 random bytes, URL-safe; the file is created with mode 0600 and never
    rewritten; a file readable by others is narrowed to 0600).

    Raises:
        ConfigError: the file cannot be created or read.
    """
    import secrets

    path = token_path(data_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
                log.warning("%s was readable by others; its mode is now 0600", path)
            token = path.read_text("utf-8").strip()
            if not token:
                raise ConfigError(f"{path} is empty: delete it to generate a new token") from None
            return token, False
        token = secrets.token_urlsafe(32)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return token, True
    except OSError as exc:
        raise ConfigError(f"cannot create the auth token {path}: {exc.strerror or exc}") from exc


def child_environ() -> dict[str, str]:
    """Return a copy of this process's environment, for the child processes it starts
    (Litestream, git, services): the one other place besides ``load`` that reads it."""
    return dict(os.environ)


def _ensure_writable(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".aimem-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(f"data dir {path} is not writable: {exc.strerror or exc}") from exc
