"""FastAPI pieces every service uses.

Error envelope, /healthz, /metrics, request timing, the drive-by guard (Host, Origin, JSON
bodies only) and the request gate (credentials before the body, a time bound on reading it).

The one HTTP error mapper: ``AimemError`` → its status and ``{"error": {code, message,
data?}}``; request validation → 400 ``bad_request``; anything else → 500 ``internal``
(logged with its traceback, never echoed).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from opentelemetry import trace
from opentelemetry.propagate import extract
from starlette.requests import ClientDisconnect
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aimem_common.auth import KEY_PREFIX, ROOT, authenticate, bearer
from aimem_common.errors import AimemError, BackPressureError, ForbiddenError, UnauthorizedError
from aimem_common.telemetry import Telemetry, tracing_enabled

if TYPE_CHECKING:
    from aimem_common.config import Settings

log = logging.getLogger("aimem.web")

HealthCheck = Callable[[], Awaitable[dict[str, Any]]]


def error_response(exc: AimemError) -> JSONResponse:
    """Render a typed error as its JSON envelope (``Retry-After`` when the error carries one)."""
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(exc.retry_after_s)
    return JSONResponse(exc.envelope(), status_code=exc.status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception to the JSON error envelope (one mapper for HTTP)."""

    @app.exception_handler(AimemError)
    async def _aimem(_: Request, exc: AimemError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        loc = ".".join(str(x) for x in first.get("loc", ()))
        msg = f"{loc}: {first.get('msg', 'invalid request')}" if loc else str(first.get("msg", "invalid request"))
        return JSONResponse({"error": {"code": "bad_request", "message": msg}}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 403: "forbidden"}.get(
            exc.status_code, "http_error"
        )
        return JSONResponse(
            {"error": {"code": code, "message": str(exc.detail)}},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _: ClientDisconnect) -> JSONResponse:
        return client_gone(request.method, request.url.path)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", exc)
        return JSONResponse({"error": {"code": "internal", "message": "internal server error"}}, status_code=500)


def client_gone(method: str, path: str) -> JSONResponse:
    """The answer to a request whose client went away before its body arrived (starlette's
    ``ClientDisconnect``): 400 ``client_disconnected``, logged at info. The client's fault, not
    ours: a 4xx in the metrics and no error log; nothing was accepted, and nobody reads it."""
    log.info("client disconnected before its request body arrived: %s %s", method, path)
    return JSONResponse({"error": {"code": "client_disconnected",
                                   "message": "the client closed the request before its body arrived"}}, status_code=400)


def install_observability(app: FastAPI, telemetry: Telemetry, health: HealthCheck, instance: str | None = None) -> None:
    """Add ``GET /healthz``, ``GET /metrics`` and a timing + tracing middleware.

    ``health()`` returns a dict of check results; any value ``False`` (or a dict with
    ``ok: False``) makes ``/healthz`` answer 503 with the details. The body also carries
    ``instance``, the run id ``aimem up`` gave this process (``Settings.up_instance``, from
    ``AIMEM_UP_INSTANCE``; null when started otherwise), so the supervisor waits only for its
    own services, never for another stack that answers on the same port.
    """
    tracer = trace.get_tracer(f"aimem.{telemetry.service}")

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        try:
            checks = await health()
        except Exception as exc:  # a failing check is a 503, not a 500
            return JSONResponse({"status": "error", "service": telemetry.service, "error": str(exc)}, 503)
        ok = all(v is not False and not (isinstance(v, dict) and v.get("ok") is False) for v in checks.values())
        body = {"status": "ok" if ok else "degraded", "service": telemetry.service, "instance": instance,
                "checks": checks}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        body, ctype = telemetry.render()
        return Response(body, media_type=ctype)

    app.add_middleware(TimingMiddleware, telemetry=telemetry, tracer=tracer)


class TimingMiddleware:
    """Time and trace every HTTP request except ``/metrics`` and ``/healthz`` (plain ASGI).

    One SERVER span per request (parent from the W3C headers) and one
    ``aimem_http_request_duration_seconds`` sample labelled with the matched route
    template (``/mcp`` for the MCP mount, ``other`` when nothing matched) and the status
    (500 when the app raised before answering). Plain ASGI rather than Starlette's
    ``BaseHTTPMiddleware``, which runs every request through an extra task and stream
    wrappers (about a third of the ingress's CPU per hook).
    """

    def __init__(self, app: ASGIApp, telemetry: Telemetry, tracer: trace.Tracer):
        self.app = app
        self.telemetry = telemetry
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in ("/metrics", "/healthz"):
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        method = scope["method"]
        status = 500
        span: trace.Span | None = None

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if span is not None:
                    span.set_attribute("http.response.status_code", status)
            await send(message)

        try:
            # Without an exporter a span is only worth making to carry a caller's traceparent on.
            if tracing_enabled() or any(k == b"traceparent" for k, _ in scope["headers"]):
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
                with self.tracer.start_as_current_span(
                    f"{method} {path}",
                    context=extract(headers),
                    kind=trace.SpanKind.SERVER,
                    attributes={"http.request.method": method, "url.path": path},
                ) as span:
                    await self.app(scope, receive, send_status)
            else:
                await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or ("/mcp" if path.startswith("/mcp") else "other")
            self.telemetry.http_latency.labels(self.telemetry.service, method, label, str(status)).observe(
                time.perf_counter() - t0
            )


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class DriveByGuard:
    """Refuse what a web page in the developer's browser can send (plain ASGI, every service).

    * ``Host`` must be one of ``allowed`` (any port) — a DNS-rebinding page reaches us with
      its own name as Host: 421 ``misdirected_host``;
    * a present ``Origin`` must be ``http(s)://<allowed host>[:port]``: 403 ``forbidden_origin``;
    * a request body must be JSON (``application/json`` or ``+json``): anything a form or a
      ``no-cors`` fetch can send without a preflight (``text/plain``, form encodings) is
      415 ``unsupported_media_type``.

    ``/healthz`` and ``/metrics`` are exempt from the Host check (probes and scrapers use
    the pod or container address). The web UI (``/web`` and ``/web/...``) posts url-encoded
    forms: those pass the body check, still under the Host and Origin checks, and the UI
    checks its own CSRF token on every form.

    Args:
        app: the ASGI app to guard.
        allowed: host names (``::1`` may be given bare).
    """

    _OPEN_PATHS = ("/healthz", "/metrics")

    def __init__(self, app: ASGIApp, allowed: list[str]):
        self.app = app
        self.hosts = {h.strip("[]").lower() for h in allowed if h and h not in ("0.0.0.0", "::")}

    def _host_ok(self, value: str) -> bool:
        host = value.strip().lower()
        if host.startswith("["):  # [::1]:8701
            host = host[1:].split("]", 1)[0]
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        return host in self.hosts

    def _origin_ok(self, origin: str) -> bool:
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme in ("http", "https") and "/" not in rest and self._host_ok(rest)

    def refusal(self, scope: Scope) -> Response | None:
        """The answer to an HTTP request this guard refuses (421, 403 or 415), else None."""
        path = scope.get("path", "")
        host = origin = ctype = length = None
        chunked = False
        for k, v in scope["headers"]:  # the names we need (ASGI servers give them lower-cased)
            k = k.lower()
            if k == b"host":
                if host is not None:  # RFC 9112 3.2: a request with more than one Host is a 400
                    return _error(400, "bad_request", "more than one Host header")
                host = v
            elif k == b"origin":
                origin = v
            elif k == b"content-type":
                ctype = v
            elif k == b"content-length":
                length = v
            elif k == b"transfer-encoding":
                chunked = True
        if path not in self._OPEN_PATHS and not self._host_ok((host or b"").decode("latin-1")):
            return _error(421, "misdirected_host", "Host not allowed (add it to allowed_hosts)")
        if origin is not None and not self._origin_ok(origin.decode("latin-1")):  # "null" included
            return _error(403, "forbidden_origin", "cross-origin requests are refused")
        if scope["method"] in ("POST", "PUT", "PATCH", "DELETE") and not _is_web(path) and (
            (length is not None and length not in (b"0", b"")) or chunked
        ):
            kind = (ctype or b"").decode("latin-1").split(";", 1)[0].strip().lower()
            if not (kind == "application/json" or kind.endswith("+json")):
                return _error(415, "unsupported_media_type", "request bodies must be application/json")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _is_web(path: str) -> bool:
    """True for the web UI's own paths (``/web``, ``/web/...``), not ``/webhook`` and the like."""
    return path == "/web" or path.startswith("/web/")


def install_guard(app: FastAPI, allowed_hosts: list[str], bind_host: str | None = None) -> None:
    """Add ``DriveByGuard`` for ``allowed_hosts`` (plus ``bind_host`` when it is a name or address)."""
    names = list(allowed_hosts) + ([bind_host] if bind_host else [])
    app.add_middleware(DriveByGuard, allowed=names)


class RequestGate:
    """Credentials from the headers before any body byte, and a bound on reading the body
    (plain ASGI, every service).

    * With a root token configured (``auth.token``), a request without a valid bearer
      credential is answered 401 ``unauthorized`` at once, before its body is read: the
      root token is compared here, a user API key (``aim_...``) is looked up through the
      service's read pool (``app.state.ctx.read_pool``) and the resulting ``Principal``
      (``ROOT`` for the root token) is left on ``request.state.principal`` for the route
      (``auth.get_principal``). Open:
      ``/healthz``, ``/favicon.ico``, the web UI (``/web``, ``/web/...``: its own login and session cookie),
      the ``self_auth`` path prefixes (an endpoint that authenticates before reading, with
      its own error body: ``/mcp``), and ``/metrics`` plus the API docs
      (``/openapi.json``, ``/docs``, ``/redoc``) unless ``metrics.require_token``, which
      makes those need a root credential (403 ``forbidden`` for a scoped key).
    * The request body must arrive within ``server.body_read_timeout_s`` of the headers,
      extended by a second per ``server.body_min_rate_bytes_s`` bytes received, never past
      ``server.body_read_max_s`` (a minimum rate, not a fixed time: a large body on a slow
      link passes, a stalled or trickled one does not): else the gate answers 408
      ``body_timeout`` with ``Connection: close`` itself and tells the route the client
      went away (whatever the route answers after that is dropped). Reading after the
      body (server-sent events waiting for a disconnect) is not bounded. An answer given
      before the body was read (a refusal, a 404) keeps the connection: the client
      finishes sending and reads it (closing at once would reset a client still sending
      and lose the answer).

    Without a root token nothing is refused here (auth off, loopback only), the time
    bound still applies.
    """

    _OPEN = ("/healthz", "/favicon.ico")  # browsers ask for the icon without credentials

    def __init__(self, app: ASGIApp, settings: Settings, docs_paths: tuple[str, ...] = (),
                 self_auth: tuple[str, ...] = ()):
        self.app = app
        self.token: str | None = settings.auth.token
        self.timeout_s: float = settings.server.body_read_timeout_s
        self.min_rate: int = settings.server.body_min_rate_bytes_s
        self.max_s: float = settings.server.body_read_max_s
        self.root_only = ("/metrics", *docs_paths) if settings.metrics.require_token else ()
        self.open = self._OPEN + (() if settings.metrics.require_token else ("/metrics", *docs_paths))
        self.self_auth = self_auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = await self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if not _has_body(scope):
            await self.app(scope, receive, send)
            return
        await self._bounded(scope, receive, send)

    async def _refusal(self, scope: Scope) -> Response | None:
        """The answer to a request whose credentials do not let it in, else None."""
        path = scope.get("path", "")
        if (self.token is None or path in self.open or _is_web(path)
                or any(path == p or path.startswith(p + "/") for p in self.self_auth)):
            return None
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
        token = bearer(header)
        try:
            if token is None:
                raise UnauthorizedError("missing bearer token")
            if hmac.compare_digest(token.encode("utf-8"), self.token.encode("utf-8")):
                scope.setdefault("state", {})["principal"] = ROOT  # the route need not compare again
                return None
            ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
            pool = getattr(ctx, "read_pool", None)
            if pool is None or not token.startswith(KEY_PREFIX):  # not a user key, or none here (writer)
                raise UnauthorizedError("unknown bearer token")
            principal = await pool.run(authenticate, header, root_token=self.token)
            if path in self.root_only and not principal.is_real_root:
                raise ForbiddenError(f"{path} needs the root credential (metrics.require_token)")
            scope.setdefault("state", {})["principal"] = principal
        except AimemError as exc:
            response = error_response(exc)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="aimem"'
            return response
        return None

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = asyncio.get_running_loop().time()
        deadline = start + self.timeout_s
        body_done = answered = started = False

        async def bounded_receive() -> Message:
            nonlocal body_done, answered, deadline
            if answered:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                answered = True
                if not started:
                    await _send_body_timeout(send, deadline - start)
                return {"type": "http.disconnect"}
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            deadline = min(deadline + len(message.get("body", b"")) / self.min_rate, start + self.max_s)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered:
                return
            started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except Exception:
            if not answered:  # after the 408 the route's own failure (client gone) is expected
                raise


async def _send_body_timeout(send: Send, timeout_s: float) -> None:
    body = JSONResponse({"error": {"code": "body_timeout",
                                   "message": f"request body not received within {timeout_s:.3g} s"}}).body
    await send({"type": "http.response.start", "status": 408,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _has_body(scope: Scope) -> bool:
    """True when the headers announce a request body (a non-zero length or a chunked one)."""
    for k, v in scope["headers"]:
        if (k == b"content-length" and v.strip() not in (b"0", b"")) or k == b"transfer-encoding":
            return True
    return False


def install_gate(app: FastAPI, settings: Settings, self_auth: tuple[str, ...] = ()) -> None:
    """Add ``RequestGate`` for ``settings`` (``self_auth``: path prefixes that authenticate
    before reading, with their own error body)."""
    docs = tuple(p for p in (app.openapi_url, app.docs_url, app.swagger_ui_oauth2_redirect_url, app.redoc_url) if p)
    app.add_middleware(RequestGate, settings=settings, docs_paths=docs, self_auth=self_auth)


# -- lean routes ----------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


class ServiceApp(FastAPI):
    """FastAPI with *lean routes*: a hot endpoint served without FastAPI's and Starlette's
    own per-request layers, behind exactly the same guards as every other request.

    ``add_lean_route(path, handler)`` registers ``handler`` (``async (Request) -> Response``,
    raising ``AimemError`` for a typed answer) as a plain route, and ``__call__`` sends a
    request for exactly that method and path to it before anything else. On the way it
    passes the app's 500 handler (Starlette's ``ServerErrorMiddleware``) and every user
    middleware of the app — the drive-by guard, timing and tracing, the request gate —
    rebuilt from ``user_middleware`` with the same arguments, so a guard added to the app
    is a guard of its lean routes too. What it skips: FastAPI's native telemetry check,
    its exception telemetry and body limit wrappers, the exception middleware, the exit
    stack, the router's matching and the route's request wrapper. ``AimemError`` becomes
    its JSON envelope as in ``install_error_handlers``.
    Any other method on the path (a ``GET``, a trailing slash) takes the full stack and
    gets its usual answer (405, redirect).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lean_routes: dict[tuple[str, str], Handler] = {}
        self._lean_apps: dict[tuple[str, str], ASGIApp] = {}

    def add_lean_route(self, path: str, handler: Handler, *, methods: tuple[str, ...] = ("POST",)) -> None:
        """Serve ``methods path`` with ``handler`` in front of the stack (see the class)."""
        self.add_route(path, handler, methods=list(methods))
        for method in methods:
            self.lean_routes[(method, path)] = handler

    def build_middleware_stack(self) -> ASGIApp:
        """The full stack (FastAPI's), and beside it the lean apps of ``lean_routes``."""
        error_handler = self.exception_handlers.get(Exception) or self.exception_handlers.get(500)
        self._lean_apps = {}
        for (method, path), handler in self.lean_routes.items():
            app: ASGIApp = lean_endpoint(handler, path)
            for cls, args, kwargs in reversed(self.user_middleware):  # as Starlette builds them
                app = cls(app, *args, **kwargs)
            self._lean_apps[(method, path)] = ServerErrorMiddleware(app, handler=error_handler, debug=self.debug)
        return super().build_middleware_stack()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        if scope["type"] == "http":
            lean = self._lean_apps.get((scope["method"], scope["path"]))
            if lean is not None:
                scope["app"] = self  # as Starlette sets it: the gate finds the service context there
                await lean(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


class _RouteLabel:
    """What ``TimingMiddleware`` reads from ``scope["route"]`` (a matched route has ``path``)."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path


def lean_endpoint(handler: Handler, path: str) -> ASGIApp:
    """``handler`` as a plain ASGI app: ``AimemError`` → its JSON envelope
    (``error_response``); anything else propagates (to the gate, which drops a failure
    after its 408, then to the 500 handler). Sets ``scope["route"]`` as a router would,
    so the request is timed under ``path``."""
    label = _RouteLabel(path)

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = label
        try:
            response = await handler(Request(scope, receive, send))
        except AimemError as exc:
            response = error_response(exc)
        except ClientDisconnect:
            response = client_gone(scope.get("method", ""), path)
        await response(scope, receive, send)

    return endpoint
