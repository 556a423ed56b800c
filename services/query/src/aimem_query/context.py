"""``QueryContext``: what the query lifespan builds once (on ``app.state.ctx``)."""

from __future__ import annotations

from dataclasses import dataclass

from aimem_common.search.access import AccessThrottle
from aimem_common.readpool import ReaderPool
from aimem_common.search.query_embed import QueryEmbedder
from aimem_common.search.service import Searcher
from aimem_common.rerank import RerankStage
from aimem_common.service import ServiceContext
from aimem_query.web.graphcache import ProjectGraphs
from aimem_query.web.health import HealthSampler
from aimem_query.web.hub import EventHub


@dataclass(slots=True, kw_only=True)
class QueryContext(ServiceContext):
    """The shared parts plus the query embedder (None-safe: FTS only without a provider),
    the access-count throttle of search hits, the ``Searcher`` built from them and the ``/web``
    live-update hub."""

    read_pool: ReaderPool
    embedder: QueryEmbedder
    access: AccessThrottle
    events: EventHub
    searcher: Searcher
    reranker: RerankStage | None = None  # the optional cross-encoder stage (rerank.provider)
    web_health: HealthSampler | None = None  # /web/status sparklines (the stack's own metrics, last hour)
    web_graphs: ProjectGraphs | None = None  # /web project link graphs, drawn ahead and kept fresh
