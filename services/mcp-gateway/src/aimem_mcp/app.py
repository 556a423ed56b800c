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

import asyncio
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from aimem_common.config import Settings
from aimem_common.read.access import AccessThrottle
from aimem_common.read.pool import ReaderPool
from aimem_common.read.query_embed import QueryEmbedder
from aimem_common.read.status import package_version
from aimem_common.service import close_nats, connect_bus
from aimem_common.telemetry import Telemetry
from aimem_common.web import install_error_handlers, install_guard, install_observability

from aimem_mcp.authn import principal_from_headers
from aimem_mcp.context import GatewayContext
from aimem_mcp.registry import build_server
from aimem_mcp.tools import ALL_TOOLS
from aimem_mcp.transport import MAX_BODY_BYTES, McpEndpoint, security_settings

MCP_METHODS = ["GET", "POST", "DELETE"]
SESSION_IDLE_TIMEOUT_S = 30 * 60


def create_app(settings: Settings) -> FastAPI:
    """Build the mcp-gateway app for ``settings`` (nothing starts until the lifespan runs)."""
    telemetry = Telemetry("mcp-gateway")
    state: dict[str, Any] = {}
    endpoint = McpEndpoint(settings, state)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            # Before the bus: a ConfigError fails startup; a local model loads once, here.
            embedder = await QueryEmbedder.open(settings)
            stack.push_async_callback(embedder.aclose)
            nc, bus = await connect_bus(settings, "mcp-gateway", telemetry)
            stack.push_async_callback(close_nats, nc)
            pool = ReaderPool(settings.db_path, size=8, wait_s=60)
            await asyncio.to_thread(pool.open)
            stack.callback(pool.close)
            gw = GatewayContext(
                settings=settings,
                nc=nc,
                bus=bus,
                pool=pool,
                access=AccessThrottle(settings.query.access_bump_interval_s),
                embedder=embedder,
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
                max_request_body_size=MAX_BODY_BYTES, session_idle_timeout=SESSION_IDLE_TIMEOUT_S,
            )
            stateful = server.session_manager
            await stack.enter_async_context(stateless.run())
            await stack.enter_async_context(stateful.run())
            endpoint.attach(stateful, stateless)
            stack.callback(endpoint.detach)
            state.update(nc=nc, bus=bus, pool=pool, gw=gw, server=server)
            app.state.ctx = gw
            app.state.settings = settings
            app.state.read_pool = pool
            yield

    async def health() -> dict:
        nc = state.get("nc")
        pool = state.get("pool")
        db_ok = False
        if pool is not None:
            db_ok = await pool.run(lambda conn: conn.execute("SELECT 1").fetchone()[0] == 1)
        return {"nats": bool(nc and nc.is_connected), "db": db_ok, "mcp": endpoint.stateful is not None}

    app = FastAPI(title="aimem-mcp-gateway", lifespan=lifespan)
    install_error_handlers(app)
    install_guard(app, [*settings.allowed_hosts, *settings.mcp_allowed_hosts], settings.host)
    install_observability(app, telemetry, health)
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=MCP_METHODS))
    return app
