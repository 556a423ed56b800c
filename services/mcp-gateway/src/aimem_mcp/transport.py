"""The ``/mcp`` endpoint: Host/Origin checks, bearer auth, session flow + stateless requests.

One ASGI app in front of two SDK session managers:

* **session flow** (what Claude Code, Codex and Cursor speak): ``initialize`` opens a
  session; later requests carry the id; ``GET`` opens the server stream, ``DELETE`` ends
  it. Served by the *stateful* manager. A session quiet for ``mcp.session_idle_timeout_s``
  is closed and its id answers 404 (the SDK's answer for an unknown id): the client
  initializes again. An ``initialize`` always opens a new session, even when it carries an
  ``Mcp-Session-Id`` (a stale one after an idle timeout or a gateway restart, which the SDK
  alone would refuse with 404, leaving a client that keeps its id stuck).
* **stateless requests** (``curl`` one-liners, batch importers): any other POST
  without a session id is served by the *stateless* manager - no handshake needed.

Before either, the request must pass the DNS-rebinding checks (``Host`` in
``settings.mcp_allowed_hosts`` with any port, else 421; a foreign ``Origin``, 403) and,
when a root token is configured, carry a valid ``Authorization: Bearer`` credential (else
401 with a JSON-RPC error body). Tools re-read the header to get the ``Principal``.
A POST body that is not JSON answers 400 with a -32700 Parse error, and JSON that is not
one JSON-RPC 2.0 message (``[]``, a batch, ``42``, ``{}``) 400 with a -32600 Invalid
Request, each with a one-line message, before the SDK sees it.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from aimem_common.auth import authenticate_from_loop
from aimem_common.config import Settings
from aimem_common.errors import AimemError, UnauthorizedError
from aimem_common.readpool import ReaderPool

from aimem_mcp.errors import AUTH_ERROR

log = logging.getLogger("aimem.mcp.transport")

MAX_BODY_BYTES = 12 * 1024 * 1024  # a full memory_write_pages_batch (8 MiB of bodies) fits


def security_settings(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection accepting ``settings.mcp_allowed_hosts`` on any port.

    Each configured name ``h`` allows ``Host: h`` and ``Host: h:<port>`` and the origins
    ``http(s)://h[:port]``; ``::1`` is added as ``[::1]``.
    """
    hosts: list[str] = []
    origins: list[str] = []
    names = list(dict.fromkeys([*settings.mcp_allowed_hosts, settings.host]))
    for name in names:
        if not name or name in ("0.0.0.0", "::"):
            continue
        h = f"[{name}]" if ":" in name and not name.startswith("[") else name
        hosts += [h, f"{h}:*"]
        origins += [f"http://{h}", f"http://{h}:*", f"https://{h}", f"https://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _rpc_error(status: int, code: int, message: str, data: dict[str, Any] | None = None,
               headers: dict[str, str] | None = None) -> Response:
    err: dict[str, Any] = {"code": code, "message": message}
    if data:
        err["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": err}, status_code=status, headers=headers)


_JSON_KINDS: dict[type, str] = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
                                type(None): "null"}


def _body_error(body: bytes) -> Response | None:
    """Return a 400 JSON-RPC error when ``body`` is not one JSON-RPC 2.0 message, else ``None``.

    Not JSON → -32700 Parse error; any other JSON than a single request, notification or
    response object (the SDK serves no batches) → -32600 Invalid Request. The message is one
    line naming what was sent, never the validator's dump.
    """
    try:
        raw = json.loads(body)
    except ValueError as exc:  # includes UnicodeDecodeError
        return _rpc_error(400, PARSE_ERROR, f"Parse error: the body is not JSON ({str(exc).splitlines()[0]})")
    if isinstance(raw, dict):
        try:
            jsonrpc_message_adapter.validate_python(raw, by_name=False)
            return None
        except ValidationError:
            got = "an object that is no JSON-RPC 2.0 request, notification or response"
    elif isinstance(raw, list):
        got = "an empty array" if not raw else "a batch (JSON array); send one message per request"
    else:
        got = f"a JSON {_JSON_KINDS.get(type(raw), 'value')}"
    return _rpc_error(400, INVALID_REQUEST, f"Invalid Request: expected one JSON-RPC 2.0 message object, got {got}")


def _is_initialize(body: bytes) -> bool:
    """True when the JSON-RPC body (already checked by ``_body_error``) is an ``initialize`` request."""
    try:
        msg = json.loads(body)
    except ValueError:
        return False
    return isinstance(msg, dict) and msg.get("method") == "initialize"


class McpEndpoint:
    """ASGI app for ``/mcp``; the lifespan attaches the two managers with ``attach``.

    Until then (or after shutdown) it answers 503, never hangs.
    """

    def __init__(self, settings: Settings):
        self.settings = settings
        self._security = TransportSecurityMiddleware(security_settings(settings))
        self.stateful: StreamableHTTPSessionManager | None = None
        self.stateless: StreamableHTTPSessionManager | None = None
        self.read_pool: ReaderPool | None = None  # for the up-front credential check

    def attach(self, stateful: StreamableHTTPSessionManager, stateless: StreamableHTTPSessionManager,
               read_pool: ReaderPool) -> None:
        self.stateful, self.stateless, self.read_pool = stateful, stateless, read_pool

    def detach(self) -> None:
        self.stateful = self.stateless = self.read_pool = None

    async def _authenticate(self, header: str | None) -> None:
        """Refuse a bad credential up front (tools authenticate again for the principal)."""
        token = self.settings.auth.token
        if token is None and not header:
            return
        pool = self.read_pool
        if pool is None:
            raise UnauthorizedError("service not ready", code="not_ready")
        await authenticate_from_loop(pool, header, root_token=token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - FastAPI only routes http here
            return
        request = Request(scope, receive)
        refused = await self._security.validate_request(request, is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if self.stateful is None or self.stateless is None:
            await _rpc_error(503, -32002, "mcp-gateway is starting or stopping; retry")(scope, receive, send)
            return
        try:
            await self._authenticate(request.headers.get("authorization"))
        except UnauthorizedError as exc:
            await _rpc_error(
                401, AUTH_ERROR, exc.message, {"code": exc.code}, headers={"WWW-Authenticate": 'Bearer realm="aimem"'}
            )(scope, receive, send)
            return
        except AimemError as exc:
            await _rpc_error(503, -32002, exc.message, {"code": exc.code})(scope, receive, send)
            return

        method = scope["method"]
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if method in ("GET", "DELETE") or (session_id and method != "POST"):
            await self.stateful.handle_request(scope, receive, send)
            return
        if method != "POST":
            await self.stateless.handle_request(scope, receive, send)
            return
        body, replay = await _buffer(receive, MAX_BODY_BYTES)
        if body is None:
            await _rpc_error(413, INVALID_REQUEST, f"request body over {MAX_BODY_BYTES} bytes")(scope, receive, send)
            return
        refused = _body_error(body)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if _is_initialize(body):  # a new session, whatever id the request carries
            await self.stateful.handle_request(_without_session_id(scope) if session_id else scope, replay, send)
        elif session_id:
            await self.stateful.handle_request(scope, replay, send)
        else:
            await self.stateless.handle_request(scope, replay, send)


def _without_session_id(scope: Scope) -> Scope:
    """Return a copy of the ASGI ``scope`` without its ``Mcp-Session-Id`` header."""
    name = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
    return {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != name]}


async def _buffer(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """Read the whole request body (≤ ``limit`` bytes) and return it with a replaying receive."""
    chunks = bytearray()
    pending: deque[Message] = deque()
    while True:
        msg = await receive()
        if msg["type"] != "http.request":
            pending.append(msg)
            break
        chunks.extend(msg.get("body", b""))
        if len(chunks) > limit:
            return None, receive
        if not msg.get("more_body", False):
            break
    pending.appendleft({"type": "http.request", "body": bytes(chunks), "more_body": False})

    async def replay() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return bytes(chunks), replay
