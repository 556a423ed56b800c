"""FastAPI pieces every service uses: error envelope, /healthz, /metrics, request timing.

The one HTTP error mapper: ``AimemError`` → its status and ``{"error": {code, message,
data?}}``; request validation → 400 ``bad_request``; anything else → 500 ``internal``
(logged with its traceback, never echoed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from opentelemetry import trace
from opentelemetry.propagate import extract
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aimem_common.errors import AimemError, BackPressureError
from aimem_common.telemetry import Telemetry, tracing_enabled

log = logging.getLogger("aimem.web")

HealthCheck = Callable[[], Awaitable[dict[str, Any]]]


def error_response(exc: AimemError) -> JSONResponse:
    """Render a typed error as its JSON envelope (adds ``Retry-After`` on 429)."""
    headers = {}
    if isinstance(exc, BackPressureError):
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

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error: %s", exc)
        return JSONResponse({"error": {"code": "internal", "message": "internal server error"}}, status_code=500)


def install_observability(app: FastAPI, telemetry: Telemetry, health: HealthCheck) -> None:
    """Add ``GET /healthz``, ``GET /metrics`` and a timing + tracing middleware.

    ``health()`` returns a dict of check results; any value ``False`` (or a dict with
    ``ok: False``) makes ``/healthz`` answer 503 with the details.
    """
    tracer = trace.get_tracer(f"aimem.{telemetry.service}")

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        try:
            checks = await health()
        except Exception as exc:  # a failing check is a 503, not a 500
            return JSONResponse({"status": "error", "service": telemetry.service, "error": str(exc)}, 503)
        ok = all(v is not False and not (isinstance(v, dict) and v.get("ok") is False) for v in checks.values())
        body = {"status": "ok" if ok else "degraded", "service": telemetry.service, "checks": checks}
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
