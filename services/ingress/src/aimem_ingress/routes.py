"""``POST /hook`` and ``POST /hook/session-start-context``.

``POST /hook?agent=&event=&extension=&workspace=&project=&cwd=`` takes a client's native
payload (``normalize.py``), sanitizes it, publishes ``observation.append`` (and, for a
session end, ``session.end``) to JetStream with the idempotency key as ``Nats-Msg-Id``, and
answers ``202 {"accepted": cmd_id}`` after the PubAck. 429 + ``Retry-After`` when the
stream is full or the writer lags; 503 when NATS is unreachable; 4xx JSON for bad input.
``cwd`` in the query is a fallback for payloads that carry none (the hook client sends its
own working directory).

``POST /hook/session-start-context`` (same query, same native session-start payload)
claims the pending handoff for that cwd through the writer (``handoff.accept``, exactly
once) and answers ``200 {"context": str, "handoff_id": int|null}`` — the fenced, bounded
text of ``brief.render_context``, ``""`` when there is nothing relevant. It does not store
the event: the hook client posts that to ``/hook`` first.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from aimem_common.errors import (
    AimemError,
    BackPressureError,
    BadRequestError,
    BusTimeoutError,
    UnauthorizedError,
    UnavailableError,
)
from aimem_common.models import ObservationKind, validate_name
from aimem_common.commands import make_envelope
from aimem_common.commands.handoffs import HandoffAccept
from aimem_common.commands.observations import SessionEnd
from aimem_common.sanitize import RawObservation, sanitize
from aimem_ingress.body import decode_json, read_capped
from aimem_ingress.brief import budget_chars, read_brief, render_context
from aimem_ingress.context import IngressContext
from aimem_ingress.deps import CtxDep
from aimem_ingress.normalize import NormalizedEvent, normalize

log = logging.getLogger("aimem.ingress")

router = APIRouter()
MAX_KEY_CHARS = 200
# One actor for every hook command, whatever the client: automatic handoffs are owned by
# their session end's actor and only visible to the same actor (or shared), and the whole
# point is that the next session may run in *another* client. The client is in `agent`.
HOOK_ACTOR = "hook"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@router.post("/hook", status_code=202)
async def post_hook(request: Request, ctx: CtxDep) -> JSONResponse:
    """Accept one hook event; see the module docstring for the contract."""
    t0 = time.perf_counter()
    status = 500
    try:
        _authorize(ctx, request)
        ev, payload = await _read_event(ctx, request)
        workspace, project = _scope(request, payload, ev)
        key = _idempotency_key(request, payload)
        _check_ready(ctx)
        ctx.gate.check()
        cmd_id, duplicate = await _publish(ctx, ev, workspace, project, key)
        ctx.metrics.events.labels(ev.agent, ev.kind.value).inc()
        status = 202
        body: dict[str, Any] = {"accepted": cmd_id}
        if duplicate:
            body["duplicate"] = True
        return JSONResponse(body, status_code=202)
    except AimemError as exc:
        status = exc.status
        raise
    finally:
        ctx.metrics.responses.labels(str(status)).inc()
        ctx.metrics.latency.labels(str(status)).observe(time.perf_counter() - t0)


@router.post("/hook/session-start-context")
async def session_start_context(request: Request, ctx: CtxDep) -> JSONResponse:
    """Claim the pending handoff for the caller's cwd and return the fenced context."""
    _authorize(ctx, request)
    ev, payload = await _read_event(ctx, request)
    workspace, project = _scope(request, payload, ev)
    handoff = await _claim_handoff(ctx, ev, workspace, project)
    pages = await ctx.read(lambda conn: read_brief(conn, workspace=workspace, project=project))
    text = render_context(handoff, pages or [], project=project,
                          max_chars=budget_chars(ctx.settings.ingress.context_max_tokens))
    ctx.metrics.contexts.labels("handoff" if handoff else ("brief" if text else "empty")).inc()
    return JSONResponse({"context": text, "handoff_id": (handoff or {}).get("id")})


def _authorize(ctx: IngressContext, request: Request) -> None:
    """Require the root bearer token when one is configured (unauthenticated = loopback only)."""
    token = ctx.settings.auth.token
    if not token:
        return
    got = request.headers.get("authorization", "")
    if not (got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), token.encode())):
        raise UnauthorizedError("missing or wrong bearer token")


async def _read_event(ctx: IngressContext, request: Request) -> tuple[NormalizedEvent, dict[str, Any]]:
    cfg = ctx.settings.ingress
    raw = await read_capped(request, cfg.max_body_bytes)
    payload = decode_json(raw, max_depth=cfg.max_json_depth)
    q = request.query_params
    ev = normalize(q.get("agent") or None, payload, event=q.get("event") or None,
                   extension=q.get("extension") or None)
    if ev.cwd is None and q.get("cwd"):
        cwd = q["cwd"][:4096]
        project = ev.project or _basename(cwd)
        ev = replace(ev, cwd=cwd, project=project)
    return ev, payload


def _basename(cwd: str) -> str | None:
    return re.split(r"[\\/]", cwd.rstrip("/\\"))[-1] or None


def _scope(request: Request, payload: dict[str, Any], ev: NormalizedEvent) -> tuple[str, str]:
    """Resolve ``(workspace, project)``: query > body > basename of cwd; names validated.

    An explicit name must be valid (400 ``invalid_name``); a cwd basename is made safe
    instead (``My Repo`` → ``My-Repo``) because the user never chose it as a name.
    """
    q = request.query_params
    workspace = q.get("workspace") or ev.workspace or "default"
    validate_name(workspace, "workspace")
    explicit = q.get("project") or (payload.get("project") if isinstance(payload.get("project"), str) else None)
    if explicit:
        return workspace, validate_name(explicit, "project")
    derived = _UNSAFE_NAME.sub("-", ev.project or "").strip(".-")[:128]
    if not derived:
        raise BadRequestError("no project: send `project` or a payload with a cwd", code="missing_project")
    return workspace, derived


def _idempotency_key(request: Request, payload: dict[str, Any]) -> str | None:
    key = request.headers.get("idempotency-key") or payload.get("idempotency_key")
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise BadRequestError(f"Idempotency-Key must be 1-{MAX_KEY_CHARS} printable chars",
                              code="invalid_idempotency_key")
    return key


def _check_ready(ctx: IngressContext) -> None:
    if not ctx.nc.is_connected:
        raise UnavailableError("NATS is unreachable; retry later", code="nats_unavailable")


async def _publish(ctx: IngressContext, ev: NormalizedEvent, workspace: str, project: str,
                   key: str | None) -> tuple[str, bool]:
    """Publish the observation (and ``session.end``); return ``(cmd_id, duplicate)``.

    Raises:
        BackPressureError / UnavailableError: from ``Bus.publish``.
    """
    raw = RawObservation(
        session_id=ev.session_id, kind=ev.kind, agent=ev.agent, cwd=ev.cwd, title=ev.title,
        body=ev.body, tool_name=ev.tool_name, source_event=ev.source_event,
        extension=ev.extension, model=ev.model, occurred_at=ev.occurred_at,
    )
    actor = HOOK_ACTOR
    env = make_envelope("observation.append", sanitize(raw).to_payload(), workspace=workspace,
                        project=project, actor=actor, idempotency_key=key)
    result = await ctx.bus.publish(env)
    if ev.kind is ObservationKind.SESSION_END:
        end = SessionEnd(session_id=ev.session_id, agent=ev.agent, cwd=ev.cwd, ended_at=ev.occurred_at)
        end_key = f"{key}:session.end" if key else f"{env.cmd_id}:session.end"
        await ctx.bus.publish(make_envelope("session.end", end, workspace=workspace, project=project,
                                            actor=actor, idempotency_key=end_key[:MAX_KEY_CHARS]))
    return env.cmd_id, result.duplicate


async def _claim_handoff(ctx: IngressContext, ev: NormalizedEvent, workspace: str,
                         project: str) -> dict[str, Any] | None:
    """Ask the writer to claim the best open handoff for ``ev.cwd``; ``None`` when none.

    Waits at most ``CLAIM_TIMEOUT_S``; a timeout, a saturated bus or an unknown project is
    "no handoff" (logged), never an error to the agent.
    """
    if not ctx.nc.is_connected:
        return None
    env = make_envelope(
        "handoff.accept",
        HandoffAccept(cwd=ev.cwd, agent=ev.agent, session_id=ev.session_id),
        workspace=workspace, project=project, actor=HOOK_ACTOR,
    )
    try:
        result = await ctx.bus.request(env, timeout_s=ctx.claim_timeout_s)
    except (BusTimeoutError, BackPressureError, UnavailableError) as exc:
        log.warning("handoff claim for %s/%s skipped: %s", workspace, project, exc.message)
        return None
    except AimemError as exc:  # not_found (no such project yet) and other typed answers
        log.info("no handoff for %s/%s: %s", workspace, project, exc.code)
        return None
    handoff = result.get("handoff")
    return handoff if isinstance(handoff, dict) else None
