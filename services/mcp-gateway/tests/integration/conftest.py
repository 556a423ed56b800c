"""Fixtures for driving the real mcp-gateway process with the official ``mcp`` client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from aimem_common.fence import fence_counts, unfence
from aimem_testing.seed import NOW, Seeder


def requires_writer_ops(*ops: str) -> None:
    """Fail unless the writer registers a handler for each of ``ops`` (the tools need them)."""
    import aimem_writer.ops  # noqa: F401  (registers every handler)
    from aimem_writer import registry

    missing = [op for op in ops if registry.get(op) is None]
    assert not missing, f"writer has no handler for {missing}"


def mcp_url(proc) -> str:
    return proc.url + "/mcp"


@pytest.fixture
def seed(settings):
    """A migrated store under the test's data dir, seeded directly (before services start)."""
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    s = Seeder(settings.db_path, clock_start=NOW)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def gateway(services):
    """Start writer + mcp-gateway; return the ``/mcp`` URL."""
    procs = services("writer", "mcp-gateway")
    return mcp_url(procs["mcp-gateway"])


def payload(result) -> dict[str, Any]:
    """The JSON object of a successful tool result (checks text and structured content agree).

    A fenced tool's text is its JSON inside one ``<aimem-memory>`` fence: checked, then unwrapped.
    """
    assert not result.is_error, result.content
    text = result.content[0].text
    if text.startswith("<aimem-memory"):
        assert fence_counts(text) == (1, 1), text
        text = unfence(text)
    data = json.loads(text)
    assert result.structured_content == data
    return data


async def call(url_or_client: Any, name: str, args: dict[str, Any] | None = None, **kw) -> dict[str, Any]:
    """Call one tool and return its JSON payload (opens a client when given a URL)."""
    if isinstance(url_or_client, str):
        async with Client(url_or_client, **kw) as c:
            return payload(await c.call_tool(name, args or {}))
    return payload(await url_or_client.call_tool(name, args or {}))


async def rpc_error(client: Any, name: str, args: dict[str, Any]) -> MCPError:
    """Call a tool that must fail with a JSON-RPC error; return the error."""
    with pytest.raises(MCPError) as info:
        res = await client.call_tool(name, args)
        pytest.fail(f"{name} should have failed, got {res.content}")  # pragma: no cover
    return info.value


def client_with_auth(url: str, token: str) -> Client:
    """The official client over Streamable HTTP with an ``Authorization: Bearer`` header."""
    from mcp.client.streamable_http import streamable_http_client

    import httpx2

    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}))
    return Client(transport, mode="legacy")


class Helpers:
    """Test helpers handed out by the ``h`` fixture (conftest modules are not importable)."""

    call = staticmethod(call)
    rpc_error = staticmethod(rpc_error)
    payload = staticmethod(payload)
    mcp_url = staticmethod(mcp_url)
    requires_writer_ops = staticmethod(requires_writer_ops)
    client_with_auth = staticmethod(client_with_auth)


@pytest.fixture
def h() -> type[Helpers]:
    return Helpers
