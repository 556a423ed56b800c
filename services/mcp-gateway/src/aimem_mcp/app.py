"""The mcp-gateway service: the MCP tool surface over Streamable HTTP at ``/mcp``.

``create_app(settings)`` builds a FastAPI app (``/healthz``, ``/metrics``, ``/mcp``);
nothing connects until the lifespan runs, which

1. builds the query embedder when ``embedding.provider`` is set (``QueryEmbedder``; a
   local model loads once, here), connects to NATS (``Bus`` for writer round trips, the
   raw client for maintainer requests) and opens the read-only ``ReaderPool``;
2. builds the ``MCPServer`` with every tool of ``aimem_mcp.tools`` bound to that context;
3. runs two session managers of that server - stateful (initialize + ``Mcp-Session-Id``)
   and stateless - which ``transport.McpEndpoint`` routes between.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Route

from aimem_common.config import Settings
from aimem_common.search.access import AccessThrottle
from aimem_common.search.query_embed import QueryEmbedder
from aimem_common.search.service import Searcher
from aimem_common.rerank import RerankStage
from aimem_common.read.status import package_version
from aimem_common.service import Startup, create_service_app
from aimem_common.telemetry import Telemetry

from aimem_mcp.authn import principal_from_headers
from aimem_mcp.context import GatewayContext
from aimem_mcp.registry import build_server
from aimem_mcp.tools import ALL_TOOLS
from aimem_mcp.transport import MAX_BODY_BYTES, McpEndpoint, security_settings

MCP_METHODS = ["GET", "POST", "DELETE"]


def create_app(settings: Settings) -> FastAPI:
    """Build the mcp-gateway app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("mcp-gateway")
    endpoint = McpEndpoint(settings)

    async def start(s: Startup) -> GatewayContext:
        stack = s.stack
        # Before the bus: a ConfigError fails startup; a local model loads once, here.
        embedder = await QueryEmbedder.open(settings)
        stack.push_async_callback(embedder.aclose)
        reranker = RerankStage.from_settings(settings.rerank)
        stack.push_async_callback(reranker.aclose)
        nc, bus = await s.connect_bus()
        reranker.attach_bus(nc)  # reranker = "llm" asks the maintainer over NATS
        pool = await s.read_pool(size=8, budget_ms=settings.query.query_budget_ms)
        access = AccessThrottle(settings.query.access_bump_interval_s)
        searcher = Searcher(pool=pool, settings=settings, embedder=embedder, reranker=reranker, bus=bus, throttle=access)
        gw = GatewayContext(
            settings=settings, telemetry=telemetry, nc=nc, bus=bus, read_pool=pool, endpoint=endpoint,
            access=access, embedder=embedder, reranker=reranker, searcher=searcher,
        )
        server = build_server(
            ALL_TOOLS, gw, telemetry, principal_from_headers, version=package_version("aimem-mcp-gateway")
        )
        security = security_settings(settings)
        server.streamable_http_app(
            stateless_http=True, json_response=True, transport_security=security,
            max_request_body_size=MAX_BODY_BYTES,
        )
        stateless = server.session_manager
        server.streamable_http_app(
            stateless_http=False, json_response=True, transport_security=security,
            max_request_body_size=MAX_BODY_BYTES, session_idle_timeout=settings.mcp.session_idle_timeout_s,
        )
        stateful = server.session_manager
        await stack.enter_async_context(stateless.run())
        await stack.enter_async_context(stateful.run())
        endpoint.attach(stateful, stateless, pool)
        stack.callback(endpoint.detach)
        return gw

    app = create_service_app("mcp-gateway", settings, telemetry, start,
                             not_ready={"nats": False, "db": False, "mcp": False},
                             self_auth=("/mcp",))  # JSON-RPC errors, checked before the body
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=MCP_METHODS))
    return app
