"""The one MCP error mapper: typed ``AimemError`` → JSON-RPC error (``MCPError``).

Every failure a tool anticipates reaches the client as a JSON-RPC error with a stable
``code`` and ``data.code`` (the aimem error code), never as a 500 or a hang:

* -32602 invalid params: bad arguments, invalid name/path, not found, too large (4xx)
* -32600 invalid request: ``precondition_failed`` (stale conditional write, ``data.reason``
  and ``data.current_page_id``) and conflicts (409, e.g. ``handoff_not_open``)
* -32001 auth: unauthorized / forbidden (401/403)
* -32002 unavailable: back-pressure, NATS/maintainer down, ``llm_not_configured`` (429/502/503)
* -32003 timeout: the writer or maintainer did not answer in time; it may still apply (504)
* -32603 internal: anything else (logged with its traceback, never echoed)
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from pydantic import ValidationError

from aimem_common.errors import (
    AimemError,
    BackPressureError,
    BadRequestError,
    BusTimeoutError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    PreconditionFailedError,
    UnauthorizedError,
    UnavailableError,
)

log = logging.getLogger("aimem.mcp.errors")

AUTH_ERROR = -32001
UNAVAILABLE_ERROR = -32002
TIMEOUT_ERROR = -32003

_CODES: tuple[tuple[type[AimemError], int], ...] = (
    (PreconditionFailedError, INVALID_REQUEST),
    (ConflictError, INVALID_REQUEST),
    (BadRequestError, INVALID_PARAMS),
    (NotFoundError, INVALID_PARAMS),
    (PayloadTooLargeError, INVALID_PARAMS),
    (PermanentError, INVALID_PARAMS),
    (UnauthorizedError, AUTH_ERROR),
    (ForbiddenError, AUTH_ERROR),
    (BusTimeoutError, TIMEOUT_ERROR),
    (BackPressureError, UNAVAILABLE_ERROR),
    (UnavailableError, UNAVAILABLE_ERROR),
)


def rpc_code(exc: AimemError) -> int:
    """Return the JSON-RPC code of a typed error (by type, then by HTTP status)."""
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    # A custom code (e.g. ``handoff_not_open``) keeps its HTTP status across the bus.
    status = exc.status
    if status in (409, 412):
        return INVALID_REQUEST
    if status in (401, 403):
        return AUTH_ERROR
    if 400 <= status < 500 and status != 429:
        return INVALID_PARAMS
    if status in (429, 502, 503):
        return UNAVAILABLE_ERROR
    if status == 504:
        return TIMEOUT_ERROR
    return INTERNAL_ERROR


def to_mcp_error(exc: AimemError) -> MCPError:
    """Map a typed aimem error to the ``MCPError`` the SDK sends as a JSON-RPC error.

    ``data`` is ``{"code": <aimem code>, **exc.data}``; a stale conditional write also
    carries ``reason: "precondition_failed"`` and ``current_page_id``, so the agent can
    re-read that version and retry.
    """
    data: dict[str, Any] = {"code": exc.code}
    if exc.data:
        data.update(exc.data)
    if isinstance(exc, PreconditionFailedError):
        data.setdefault("reason", "precondition_failed")
        data.setdefault("current_page_id", None)
    if isinstance(exc, BackPressureError):
        data.setdefault("retry_after_s", exc.retry_after_s)
    return MCPError(rpc_code(exc), exc.message, data)


def invalid_params(exc: ValidationError, tool: str) -> MCPError:
    """Turn a pydantic validation failure of a tool's arguments into -32602.

    The message names every bad field (``path: Field required; limit: ...``) so an agent
    can fix its call; rejected *values* are not echoed (they are the caller's data).
    """
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown argument"
        parts.append(f"{loc}: {msg}")
    fields = sorted({".".join(str(x) for x in e.get("loc", ())) for e in exc.errors()})
    return MCPError(
        INVALID_PARAMS,
        f"invalid arguments for {tool}: " + "; ".join(parts),
        {"code": "invalid_params", "fields": fields},
    )


def internal(tool: str) -> MCPError:
    """The generic -32603 for an unexpected crash (details stay in the server log)."""
    return MCPError(INTERNAL_ERROR, f"internal error in {tool}; see the mcp-gateway log", {"code": "internal"})
