"""Managed workstreams at ingress: the session-start packet and the launcher's routes.

``start_packet`` is called by ``POST /hook/session-start-context`` when the hook client
sent a ``run_id`` (the child of ``aimem run`` carries ``AIMEM_RUN_ID``): it reads the events
of the run's workstream past its harness's delivery cursor and renders the packet
(``aimem_common.workstreams.render_packet``: origin marker, fenced, bounded). The caller
claims it with the pending handoff in one writer command (``handoff.accept`` carries
``run_id``/``through_seq``), or with ``claim`` when the start claims no handoff, and appends
it after the handoff and brief; a claim that fails drops both (the next start gets them
again), so the cursors and what the harness saw never disagree.

The launcher's routes (``aimem run``; the same credentials and project grants as a hook,
``require_hook_write``), each one writer round trip, JSON in and out:

- ``POST /hook/workstream/lease?<identity>`` ``{action, run_id, harness?, cwd?, exit_code?}``
  → ``{run: {...}}`` (409 ``workstream_leased`` while another run holds it);
- ``POST /hook/workstream/append?<identity>`` ``{run_id, native_session_id?, events: [{role,
  text, ts?, source_key?}]}`` → ``{appended, first_seq, last_seq, skipped, rejected}``; every
  text is made storable and redacted here (and again by the writer);
- ``POST /hook/workstream/rename?<identity>`` ``{workstream_id, name}``.

``<identity>`` is the hook client's query: ``workspace``, ``project``, ``root``, ``origin``,
``repo_id``, ``named``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from aimem_common import locations
from aimem_common.commands import make_envelope, parse_payload
from aimem_common.commands.workstreams import WorkstreamDeliver
from aimem_common.errors import AimemError, BadRequestError
from aimem_common.models import validate_name
from aimem_common.read import scopes
from aimem_common.read import workstreams as wsread
from aimem_common.redact import redact
from aimem_common.sanitize import storable
from aimem_common.workstreams import render_packet
from aimem_ingress.body import decode_json, read_capped
from aimem_ingress.context import IngressContext
from aimem_ingress.deps import CtxDep

log = logging.getLogger("aimem.ingress")
router = APIRouter()
LAUNCHER_ACTOR = "hook"  # the same actor as hooks: a run's writes belong to the project, not a user
ROUTE_TIMEOUT_S = 5.0


async def start_packet(ctx: IngressContext, run_id: str, scope: Any, *, room: int) -> tuple[str, int] | None:
    """Return ``(packet, last seq)`` of what the run's harness has not seen, or None.

    None also when the run is unknown, is not in the event's project, or nothing fits ``room``.
    """
    def read(conn):
        info = wsread.run_with_workstream(conn, run_id)
        if info is None:
            return None
        found = scopes.lookup(conn, scope.workspace, scope.project, root=scope.root, origin=scope.origin,
                              explicit=scope.explicit, repo_id=scope.repo_id)
        if found is None or found.project_id != info["workstream"]["project_id"]:
            return "elsewhere"
        return info, wsread.events_after(conn, info["workstream"]["id"], info["delivered_seq"])

    got = await ctx.read(read)
    if got is None:
        return None
    if got == "elsewhere":
        log.warning("run %s does not belong to %s/%s: no workstream packet", run_id, scope.workspace, scope.project)
        return None
    info, events = got
    ws = info["workstream"]
    out = render_packet(ws["id"], ws["name"], info["run"]["harness"], events, max_chars=room,
                        unseen_from=info["delivered_seq"] + 1)
    return (out[0], out[2]) if out else None


async def claim(ctx: IngressContext, run_id: str, through_seq: int, scope: Any) -> bool:
    """Move the run's harness cursor to ``through_seq`` through the writer; False when that failed."""
    env = make_envelope("workstream.deliver", WorkstreamDeliver(run_id=run_id, through_seq=through_seq),
                        actor=LAUNCHER_ACTOR, **scope.envelope_kwargs())
    try:
        await ctx.bus.request(env, timeout_s=ctx.claim_timeout_s)
    except AimemError as exc:
        log.warning("workstream delivery claim for run %s failed: %s", run_id, exc.message)
        return False
    return True


async def _scope_and_body(ctx: IngressContext, request: Request) -> tuple[Any, dict[str, Any]]:
    from aimem_ingress.routes import HookScope, _authorize, _key_field, require_hook_write

    principal = await _authorize(ctx, request)
    q = request.query_params
    project = q.get("project")
    if not project:
        raise BadRequestError("send the checkout's identity (project, root, ...)", code="missing_project")
    root = locations.normalize(_key_field(q.get("root"), "root", 4096))
    scope = HookScope(validate_name(q.get("workspace") or "default", "workspace"), validate_name(project, "project"),
                      root, _key_field(q.get("origin"), "origin", 1024), q.get("named") == "1",
                      q.get("repo_id") or None)
    await require_hook_write(ctx, principal, scope)
    cfg = ctx.settings.ingress
    body = decode_json(await read_capped(request, max(cfg.max_body_bytes, 4 * 1024 * 1024)),
                       max_depth=cfg.max_json_depth)
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object", code="invalid_body")
    return scope, body


async def relay(ctx: IngressContext, request: Request, op: str) -> JSONResponse:
    """One launcher-style route: the identity query and JSON body (``_scope_and_body``), the body
    validated as ``op``'s payload (400 ``invalid_payload``), one writer round trip, its result."""
    scope, body = await _scope_and_body(ctx, request)
    return await _send(ctx, op, parse_payload(op, body), scope)


async def _send(ctx: IngressContext, op: str, payload: Any, scope: Any) -> JSONResponse:
    env = make_envelope(op, payload, actor=LAUNCHER_ACTOR, **scope.envelope_kwargs())
    return JSONResponse(await ctx.bus.request(env, timeout_s=ROUTE_TIMEOUT_S))


def _clean(text: Any) -> str:
    return redact(storable(str(text))).text if text is not None else ""


@router.post("/hook/workstream/lease")
async def lease(request: Request, ctx: CtxDep) -> JSONResponse:
    """Open, renew, release or cancel a run lease (see the module docstring)."""
    return await relay(ctx, request, "workstream.lease")


@router.post("/hook/workstream/append")
async def append(request: Request, ctx: CtxDep) -> JSONResponse:
    """Append a run's visible transcript events (texts cleaned here, again in the writer)."""
    scope, body = await _scope_and_body(ctx, request)
    events = body.get("events")
    if not isinstance(events, list):
        raise BadRequestError("events must be a list", code="invalid_body")
    cleaned = [{**e, "text": _clean(e.get("text"))[:16 * 1024]} for e in events if isinstance(e, dict)]
    cleaned = [e for e in cleaned if e["text"].strip()]
    return await _send(ctx, "workstream.append", parse_payload("workstream.append", {**body, "events": cleaned}), scope)


@router.post("/hook/workstream/rename")
async def rename(request: Request, ctx: CtxDep) -> JSONResponse:
    """Rename a workstream of the checkout's project."""
    return await relay(ctx, request, "workstream.rename")

