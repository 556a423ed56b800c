"""``install``: mount the web interface on the query app (routes, static files, HTML errors)."""


from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRouter
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from aimem_common.errors import AimemError, BackPressureError, UnauthorizedError
from aimem_query.web import (activity, admin, events, login, pages, pictures, profile, projects, search, session,
                             workstreams)
from aimem_common.config import Settings
from aimem_query.web.render import Renderer

STATIC = Path(__file__).parent / "static"
PREFIX = "/web"

router = APIRouter(prefix=PREFIX, include_in_schema=False)
for _module in (login, projects, pages, search, pictures, activity, workstreams, profile, admin, events):
    router.include_router(_module.router)


def install(app: FastAPI, settings: Settings) -> None:
    """Add ``/web`` to the query app: routes, ``/web/static``, HTML error pages.

    The renderer, the login limiter and the web settings live on ``app.state`` (``web_*``):
    built here once, they need nothing the lifespan starts.
    """
    app.state.web_settings = settings.web
    app.state.web_renderer = Renderer()
    app.state.web_limiter = session.LoginLimiter(settings.web.login_window_s)
    app.include_router(router)
    app.mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="web-static")
    icon = (STATIC / "favicon.svg").read_bytes()

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """The icon browsers ask for on every screen (open, like ``/healthz``; an SVG)."""
        return Response(icon, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})

    _install_error_pages(app)


def _is_web(request: Request) -> bool:
    return request.url.path == PREFIX or request.url.path.startswith(PREFIX + "/")


def _install_error_pages(app: FastAPI) -> None:
    """Errors under ``/web`` become HTML pages (the JSON envelope stays for the API)."""
    json_handlers = {cls: app.exception_handlers[cls]
                     for cls in (AimemError, StarletteHTTPException, RequestValidationError)}

    def error_page(request: Request, status: int, code: str, message: str, headers=None) -> Response:
        return app.state.web_renderer.page(request, "error.html", http_status=status, code=code, message=message,
                                           headers=headers)

    async def on_aimem(request: Request, exc: AimemError) -> Response:
        if not _is_web(request):
            return await json_handlers[AimemError](request, exc)
        if isinstance(exc, UnauthorizedError):
            ended = "&ended=1" if isinstance(exc, session.LoginRequired) and (exc.data or {}).get("ended") else ""
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            resp = RedirectResponse(f"{PREFIX}/login?next={quote(target, safe='')}{ended}", status_code=303)
            session.clear_session_cookie(request, resp)
            return resp
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, BackPressureError) else None
        return error_page(request, exc.status, exc.code, exc.message, headers)

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        if not _is_web(request):
            return await json_handlers[StarletteHTTPException](request, exc)
        messages = {404: "There is nothing at this address.", 405: "This address does not take that method."}
        return error_page(request, exc.status_code, "not_found" if exc.status_code == 404 else "http_error",
                          messages.get(exc.status_code, str(exc.detail)))

    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        if not _is_web(request):
            return await json_handlers[RequestValidationError](request, exc)
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        return error_page(request, 400, "bad_request", f"{where}: {first.get('msg', 'invalid request')}")

    app.add_exception_handler(AimemError, on_aimem)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
