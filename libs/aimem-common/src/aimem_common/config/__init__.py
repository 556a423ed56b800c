"""Settings: the one config-read path (DESIGN.md invariant 1) and every section it fills.

``load()`` resolves, in order of precedence: environment ``AIMEM_*`` (nested sections with
``__``, e.g. ``AIMEM_DECAY__LAMBDA=0.05``) > ``<data_dir>/config.toml`` > defaults, once per
process (``main()``/``create_app()``); the ``Settings`` object is passed down from there.

The package's parts, one job each: ``stack`` (the five services, their ports and packages),
``settings`` (``Settings``, the root), the sections by what they configure (``pipeline``:
bus, writer, ingress, query, search; ``knowledge``: decay, maintenance, slots,
consolidation, auto-improve, retrieval; ``providers``: LLM, embedding, rerank; ``surface``:
server, auth, metrics, MCP, web; ``outbound``: admission webhooks, mirrors, replication),
``loader`` (``load``, the only reader of ``os.environ``) and ``tokens`` (the root token file).
A new setting goes into its section's module and README "Configuration". The names below
are the package's public interface.
"""

from __future__ import annotations

from aimem_common.config.knowledge import (
    AutoImproveEval,
    AutoImproveScheduler,
    AutoImproveSettings,
    ConsolidationSettings,
    DecaySettings,
    MaintenanceSettings,
    RetrievalSettings,
    SlotSettings,
)
from aimem_common.config.loader import child_environ, load
from aimem_common.config.outbound import (
    AdmissionOperation,
    AdmissionSettings,
    AdmissionWebhook,
    MirrorSettings,
    ReplicationSettings,
)
from aimem_common.config.pipeline import BusSettings, IngressSettings, QuerySettings, SearchSettings, WriterSettings
from aimem_common.config.providers import (
    EmbeddingSettings,
    LlmCandidate,
    LlmSettings,
    ReasoningEffort,
    RerankSettings,
)
from aimem_common.config.settings import Settings
from aimem_common.config.stack import DEFAULT_PORT_BASE, PORT_OFFSETS, SERVICE_MODULES, SERVICES
from aimem_common.config.surface import AuthSettings, McpSettings, MetricsSettings, ServerSettings, WebSettings
from aimem_common.config.tokens import ensure_token_file, read_token_file, token_path
from aimem_common.errors import ConfigError

__all__ = [
    "DEFAULT_PORT_BASE", "PORT_OFFSETS", "SERVICES", "SERVICE_MODULES",
    "AdmissionOperation", "AdmissionSettings", "AdmissionWebhook", "AuthSettings", "AutoImproveEval",
    "AutoImproveScheduler", "AutoImproveSettings", "BusSettings", "ConfigError", "ConsolidationSettings",
    "DecaySettings", "EmbeddingSettings", "IngressSettings", "LlmCandidate", "LlmSettings", "MaintenanceSettings",
    "McpSettings", "MetricsSettings", "MirrorSettings", "QuerySettings", "ReasoningEffort", "ReplicationSettings",
    "RerankSettings", "RetrievalSettings", "SearchSettings", "ServerSettings", "Settings", "SlotSettings",
    "WebSettings", "WriterSettings",
    "child_environ", "ensure_token_file", "load", "read_token_file", "token_path",
]
