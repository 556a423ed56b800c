"""``Settings``: every setting of every service, the sections' root."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from aimem_common.config.knowledge import (
    AutoImproveSettings,
    ConsolidationSettings,
    DecaySettings,
    MaintenanceSettings,
    RetrievalSettings,
    SlotSettings,
)
from aimem_common.config.outbound import AdmissionSettings, MirrorSettings, ReplicationSettings
from aimem_common.config.pipeline import BusSettings, IngressSettings, QuerySettings, SearchSettings, WriterSettings
from aimem_common.config.providers import EmbeddingSettings, LlmCandidate, LlmSettings, RerankSettings
from aimem_common.config.stack import DEFAULT_PORT_BASE, PORT_OFFSETS
from aimem_common.config.surface import AuthSettings, McpSettings, MetricsSettings, ServerSettings, WebSettings


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
    # The run id `aimem up` gives the services it starts (AIMEM_UP_INSTANCE); `/healthz` reports it
    # so the supervisor waits only for its own processes. None when started otherwise.
    up_instance: str | None = None

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
