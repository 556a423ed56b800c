"""Per-tool-call authentication: the ``Principal`` of the request's bearer credential."""

from __future__ import annotations

from collections.abc import Mapping

from aimem_common.auth import Principal, authenticate_from_loop

from aimem_mcp.context import GatewayContext


async def principal_from_headers(gw: GatewayContext, headers: Mapping[str, str] | None) -> Principal:
    """Return the principal of the ``Authorization`` header carried by this MCP message.

    Raises:
        UnauthorizedError: auth is on and the credential is missing or unknown (the HTTP
            layer refuses such requests first; this guards in-process callers).
    """
    header = None
    for k, v in (headers or {}).items():
        if k.lower() == "authorization":
            header = v
            break
    return await authenticate_from_loop(gw.read_pool, header, root_token=gw.settings.auth.token)
