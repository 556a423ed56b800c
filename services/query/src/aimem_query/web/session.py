"""Who is using the web interface: session cookies, CSRF tokens, the login rate limit.

* **Session**: the ``aimem_session`` cookie holds a random token (HttpOnly,
  ``SameSite=Strict``, path ``/web``, ``Secure`` over https); the DB keeps only its sha256
  (``web_sessions``, written by the writer's ``websession.*`` ops). Every request re-reads
  the row with its user, key and grants (``aimem_common.auth.web_session``), so a deleted
  user, a revoked key, a changed password or an expired session is logged out at once.
* **CSRF**: every form carries ``csrf`` = sha256 of a secret the browser holds only in an
  HttpOnly cookie (the session token, or before login the ``aimem_pre`` cookie). Another
  origin can neither read that cookie nor, with ``SameSite=Strict``, send it along.
* **Auth off** (no root token configured; the server binds loopback only): a visitor
  without a session is the unrestricted ``anonymous`` principal, as on the API.
* **Rate limit**: failed logins are counted in memory per user name and per client
  address in a sliding window (``web.login_max_failures`` per ``web.login_window_s``;
  an address gets four times as many); past it the login answers 429 with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

from fastapi import Request

from aimem_common import auth
from aimem_common.auth import Principal
from aimem_common.errors import (
    BackPressureError,
    ForbiddenError,
    PayloadTooLargeError,
    UnauthorizedError,
    BadRequestError,
)
from aimem_query.deps import ctx_of

SESSION_COOKIE = "aimem_session"
PRE_COOKIE = "aimem_pre"
COOKIE_PATH = "/web"
MAX_FORM_BYTES = 600 * 1024  # a page body (256 KiB) url-encoded, plus the other fields


@dataclass(frozen=True, slots=True)
class WebUser:
    """The principal behind a browser request, and the CSRF token its forms must carry.

    ``token_hash`` is None for the anonymous visitor of an auth-off server.
    """

    principal: Principal
    token_hash: str | None
    csrf: str

    @property
    def name(self) -> str:
        """The display and actor name (``root``, ``user:alice``, ``anonymous``)."""
        return self.principal.name


class LoginRequired(UnauthorizedError):
    """No live session: the web answers with a redirect to the login page (and drops the cookie)."""

    code = "login_required"


def digest(token: str) -> str:
    """Return the sha256 hex of a session token (what ``web_sessions.token_hash`` stores)."""
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_for(secret: str) -> str:
    """Return the form token bound to ``secret`` (a session token or the pre-login secret)."""
    return hashlib.sha256(b"aimem-csrf\0" + secret.encode()).hexdigest()


def now_iso() -> str:
    """Return now as RFC 3339 UTC (``...Z``)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def expiry_iso(ttl_s: int) -> str:
    """Return now + ``ttl_s`` seconds as RFC 3339 UTC."""
    return (datetime.now(UTC) + timedelta(seconds=ttl_s)).isoformat().replace("+00:00", "Z")


def pre_secret(request: Request) -> str:
    """Return the browser's pre-login secret; make one (set by the renderer) when absent."""
    value = request.cookies.get(PRE_COOKIE) or getattr(request.state, "new_pre_secret", None)
    if not value or len(value) < 32:
        value = secrets.token_urlsafe(32)
        request.state.new_pre_secret = value
    return value


async def current_user(request: Request) -> WebUser:
    """FastAPI dependency of every signed-in screen: the ``WebUser`` of this request.

    Raises:
        LoginRequired: no cookie, or a session that is unknown, expired or ended (the
            error handler redirects to ``/web/login`` and clears the cookie).
    """
    cached = getattr(request.state, "web_user", None)
    if cached is not None:
        return cached
    settings = ctx_of(request).settings
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        principal = await ctx_of(request).read_pool.run(
            auth.web_session, digest(token), root_token=settings.auth.token, now=now_iso()
        )
        if principal is None:
            raise LoginRequired("your session has ended; please log in again", data={"ended": True})
        user = WebUser(principal, digest(token), csrf_for(token))
    elif settings.auth.token is None:
        user = WebUser(auth.ANONYMOUS, None, csrf_for(pre_secret(request)))
    else:
        raise LoginRequired("please log in")
    request.state.web_user = user
    return user


async def read_form(request: Request, csrf: str) -> dict[str, str]:
    """Parse a url-encoded form and check its ``csrf`` field against ``csrf``.

    Returns the fields (last value wins; blank values kept).

    Raises:
        BadRequestError: not ``application/x-www-form-urlencoded``.
        PayloadTooLargeError: a body over ``MAX_FORM_BYTES``.
        ForbiddenError: ``csrf_failed`` (missing or wrong token; also a foreign ``Origin``).
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise BadRequestError("forms must be application/x-www-form-urlencoded", code="bad_request")
    origin = request.headers.get("origin")
    if origin and origin != "null" and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
        raise ForbiddenError("cross-origin form refused", code="csrf_failed")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadTooLargeError(f"form larger than {MAX_FORM_BYTES} bytes")
    fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    if not hmac.compare_digest(fields.get("csrf", "").encode(), csrf.encode()):
        raise ForbiddenError("the form's security token is missing or wrong; reload the page and retry",
                             code="csrf_failed")
    return fields


def set_session_cookie(request: Request, response, token: str, ttl_s: int) -> None:
    """Set the session cookie on ``response`` (HttpOnly, SameSite=Strict, path /web)."""
    response.set_cookie(SESSION_COOKIE, token, max_age=ttl_s, path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=_secure(request))


def clear_session_cookie(request: Request, response) -> None:
    """Expire the session cookie on ``response``."""
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict",
                           secure=_secure(request))


def set_pre_cookie(request: Request, response) -> None:
    """Set the pre-login secret cookie when ``pre_secret`` made a new one for this request."""
    value = getattr(request.state, "new_pre_secret", None)
    if value:
        response.set_cookie(PRE_COOKIE, value, path=COOKIE_PATH, httponly=True, samesite="strict",
                            secure=_secure(request))


def _secure(request: Request) -> bool:
    configured = request.app.state.web_settings.cookie_secure
    return request.url.scheme == "https" if configured is None else configured


class LoginLimiter:
    """Failed-login counter per key in a sliding window (in memory, per process).

    ``check(keys)`` raises ``BackPressureError`` (429, ``Retry-After``) when any key is at
    its limit; ``fail(keys)`` records a failure; ``reset(keys)`` forgets them on success.
    Keys are ``(kind, value, limit)`` tuples.
    """

    def __init__(self, window_s: int, *, clock=time.monotonic):
        self.window_s = window_s
        self.clock = clock
        self._fails: dict[tuple[str, str], deque[float]] = {}

    def _recent(self, key: tuple[str, str]) -> deque[float]:
        q = self._fails.setdefault(key, deque())
        cutoff = self.clock() - self.window_s
        while q and q[0] <= cutoff:
            q.popleft()
        return q

    def check(self, keys: list[tuple[str, str, int]]) -> None:
        for kind, value, limit in keys:
            q = self._recent((kind, value))
            if len(q) >= limit:
                wait = max(1, int(q[0] + self.window_s - self.clock()) + 1)
                raise BackPressureError(f"too many failed logins; retry in {wait} s", retry_after_s=wait,
                                        data={"limited_by": kind})

    def fail(self, keys: list[tuple[str, str, int]]) -> None:
        now = self.clock()
        for kind, value, _ in keys:
            self._recent((kind, value)).append(now)
        if len(self._fails) > 10_000:  # bound memory under a spray of names
            for k in [k for k, q in self._fails.items() if not q]:
                del self._fails[k]

    def reset(self, keys: list[tuple[str, str, int]]) -> None:
        for kind, value, _ in keys:
            self._fails.pop((kind, value), None)
