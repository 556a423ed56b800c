"""Sections of what the services expose over HTTP.

``[server]``, ``[auth]``, ``[metrics]``, ``[mcp]``, ``[web]``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ServerSettings(BaseModel):
    """HTTP limits every service applies before a route runs (``aimem_common.http.RequestGate``)."""

    # A request body must arrive within this many seconds of its headers, extended by one
    # second per ``body_min_rate_bytes_s`` bytes received (a 2 MiB import over a slow
    # link), never past ``body_read_max_s``; else 408 and the connection is closed: a
    # client that stalls mid-body holds nothing for long.
    body_read_timeout_s: float = Field(5.0, gt=0)
    body_min_rate_bytes_s: int = Field(64 * 1024, gt=0)
    body_read_max_s: float = Field(60.0, gt=0)


class AuthSettings(BaseModel):
    """Root bearer token (``AIMEM_AUTH__TOKEN`` or ``[auth] token``; else ``load`` reads the
    token file ``aimem up`` generates, ``<data_dir>/auth/token``); None = unauthenticated,
    loopback only."""

    token: str | None = None
    insecure_bind: bool = False


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
