"""``/web/login`` and ``/web/logout``: a password, an API key or the root token opens a session.

A login sends ``websession.create`` to the writer (the session exists once it committed)
and sets the cookie; a logout sends ``websession.delete`` and expires it. Failed attempts
count toward the rate limit (``session.LoginLimiter``) before any hash is checked.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common import auth
from aimem_common.commands import make_envelope
from aimem_query.deps import ctx_of
from aimem_query.web import session
from aimem_query.web.deps import UserDep, form, renderer, send
from aimem_query.web.passwords import verify_password

router = APIRouter()


def safe_next(value: str | None) -> str:
    """Return ``value`` when it is a local ``/web`` path, else ``/web/`` (no open redirect)."""
    if value and (value == "/web" or value.startswith("/web/")) and "\\" not in value:
        return value
    return "/web/"


def _limit_keys(request: Request, name: str) -> list[tuple[str, str, int]]:
    web = ctx_of(request).settings.web
    client = request.client.host if request.client else "?"
    keys = [("client", client, web.login_max_failures * 4)]
    if name:
        keys.append(("user", name.casefold(), web.login_max_failures))
    return keys


@router.get("/login")
async def login_page(request: Request, next: str | None = None, ended: int = 0, bye: int = 0) -> Response:
    """The login form: user name + password, or an API key / the root token."""
    notice = "You have been logged out." if bye else ("Your session has ended; please log in again." if ended else None)
    return renderer(request).page(request, "login.html", user=None, next=safe_next(next), notice=notice,
                                  error=None, auth_off=ctx_of(request).settings.auth.token is None)


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the credential and open a session (303 to ``next``); 401 page on a mismatch.

    Fields: ``csrf``, ``next``, and either ``name`` + ``password`` or ``token`` (an
    ``aim_`` API key or the root token).

    Raises:
        ForbiddenError: bad CSRF token (403). BackPressureError: rate-limited (429).
    """
    fields = await session.read_form(request, session.csrf_for(session.pre_secret(request)))
    settings = ctx_of(request).settings
    name = fields.get("name", "").strip()
    password = fields.get("password", "")
    token = fields.get("token", "").strip()
    keys = _limit_keys(request, name if not token else "")
    limiter: session.LoginLimiter = request.app.state.web_limiter
    limiter.check(keys)
    pool = ctx_of(request).read_pool
    payload: dict | None = None
    if token:
        if settings.auth.token and hmac.compare_digest(token.encode(), settings.auth.token.encode()):
            payload = {"root_fp": auth.hash_key(token)}
        elif token.startswith(auth.KEY_PREFIX):
            row = await pool.run(auth.lookup_key_row, token)
            if row is not None:
                payload = {"user": row["name"], "api_key_id": row["key_id"]}
    elif name and password:
        row = await pool.run(auth.user_for_login, name)
        ok = await asyncio.to_thread(verify_password, row["password_hash"] if row else None, password)
        if ok and row is not None:
            payload = {"user": row["name"]}
    if payload is None:
        limiter.fail(keys)
        return renderer(request).page(request, "login.html", http_status=401, user=None, next=safe_next(fields.get("next")),
                                      notice=None, error="Wrong user name or password, or an unknown key.",
                                      auth_off=settings.auth.token is None)
    limiter.reset(keys)
    secret = secrets.token_urlsafe(32)
    ttl = settings.web.session_ttl_s
    await _send_raw(request, "websession.create", {
        "token_hash": session.digest(secret), "expires_at": session.expiry_iso(ttl),
        "client": request.headers.get("user-agent", "")[:256] or None, **payload,
    }, actor=f"user:{payload['user']}" if "user" in payload else "root")
    resp = RedirectResponse(safe_next(fields.get("next")), status_code=303)
    session.set_session_cookie(request, resp, secret, ttl)
    return resp


async def _send_raw(request: Request, op: str, payload: dict, *, actor: str) -> dict:
    return await ctx_of(request).bus.request(make_envelope(op, payload, actor=actor), timeout_s=30)


@router.post("/logout")
async def logout(request: Request, user: UserDep) -> Response:
    """End the session (writer op) and expire the cookie; 303 to the login page."""
    await form(request, user)
    if user.token_hash is not None:
        await send(request, user, "websession.delete", {"token_hash": user.token_hash})
    resp = RedirectResponse("/web/login?bye=1", status_code=303)
    session.clear_session_cookie(request, resp)
    return resp

