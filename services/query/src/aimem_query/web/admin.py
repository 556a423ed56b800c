"""Pending writes (diff, approve, reject), the lint report, status and the audit log.

Pending writes, the audit log and store-wide counts are root screens (as ``/admin``);
the lint report is a project screen (running lint needs the write grant).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from aimem_common import maint_rpc
from aimem_common.config import PORT_OFFSETS
from aimem_common.errors import AimemError, NotFoundError
from aimem_common.models import DbId
from aimem_common.read import audit, pages, proposals, scopes
from aimem_common.read import status as status_reads
from aimem_query.deps import ctx_of, read
from aimem_query.web.deps import UserDep, form, renderer, require_root, scope_for, send
from aimem_query.web import health, layout
from aimem_query.web.diff import unified
from aimem_query.web.render import page_url

router = APIRouter()

HEALTH_LINES = (("hooks_per_min", "Hooks", "a minute"), ("writer_lag", "Writer lag", "pending"),
                ("applied_per_s", "Apply rate", "commands/s"), ("dead_letters", "Dead letters", "open"),
                ("replication_lag_s", "Replication lag", "s"))

LINT_REPORT = "_lint/report.md"
AUDIT_PAGE = 100


@router.get("/pending")
async def pending_list(request: Request, user: UserDep, status: str = "pending") -> Response:
    """Auto-improve proposals waiting for approval (or ``status`` approved/rejected/any)."""
    require_root(user)
    status = status if status in ("pending", "approved", "rejected", "any") else "pending"
    rows = await read(request, proposals.list_proposals, None, None if status == "any" else status, 200)
    return renderer(request).page(request, "pending.html", proposals=rows, status=status)


@router.get("/pending/{proposal_id}")
async def pending_detail(request: Request, user: UserDep, proposal_id: int) -> Response:
    """One proposal: rationale, confidence and the diff against the page it would replace."""
    require_root(user)

    def load(conn) -> dict[str, Any]:
        prop = proposals.get_proposal(conn, proposal_id)
        scope = scopes.resolve(conn, prop["workspace"], prop["project"])
        try:
            current = pages.get_page(conn, scope, path=prop["path"])
        except NotFoundError:
            current = None
        return {"prop": prop, "current": current}

    data = await read(request, load)
    lines = unified(data["current"]["body"] if data["current"] else "", data["prop"]["body"],
                    old_name="current", new_name="proposed")
    return renderer(request).page(request, "pending_detail.html", lines=lines, **data)


@router.post("/pending/{proposal_id}/{decision}")
async def pending_decide(request: Request, user: UserDep, proposal_id: int, decision: str) -> Response:
    """Approve (the proposal becomes the page) or reject it (``proposal.approve|reject``)."""
    require_root(user)
    fields = await form(request, user)
    if decision not in ("approve", "reject"):
        raise NotFoundError(f"no decision {decision!r}")
    payload: dict[str, Any] = {"ids": [proposal_id]}
    if decision == "reject" and fields.get("reason"):
        payload["reason"] = fields["reason"][:2000]
    await send(request, user, f"proposal.{decision}", payload)
    return RedirectResponse(f"/web/pending/{proposal_id}", status_code=303)


@router.get("/p/{workspace}/{project}/lint")
async def lint(request: Request, user: UserDep, workspace: str, project: str, ran: int = 0) -> Response:
    """The project's lint report (``_lint/report.md``, written by the maintainer)."""
    scope = await scope_for(request, user, workspace, project)
    try:
        page = await read(request, pages.get_page, scope, path=LINT_REPORT, reader=user.principal)
    except NotFoundError:
        page = None
    r = renderer(request)
    html = r.markdown(page["body"], workspace=scope.workspace, project=scope.project,
                      resolved={(scope.workspace, scope.project, ln["to_path"]): ln["resolved"]
                                for ln in page["links"]}) if page else None
    return r.page(request, "lint.html", scope=scope, page=page, html=html, ran=ran,
                  can_write=user.principal.can_write(workspace, project))


@router.post("/p/{workspace}/{project}/lint")
async def lint_run(request: Request, user: UserDep, workspace: str, project: str) -> Response:
    """Ask the maintainer to lint the project now and show the report."""
    scope = await scope_for(request, user, workspace, project, write=True)
    await form(request, user)
    await maint_rpc.call(ctx_of(request).nc, "lint", workspace=scope.workspace, project=scope.project,
                         actor=user.name, args={})
    return RedirectResponse(page_url(workspace, project, screen="lint") + "?ran=1", status_code=303)


async def _service_health(request: Request) -> list[dict[str, Any]]:
    settings = ctx_of(request).settings
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host

    async def one(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
        url = f"http://{host}:{settings.port(name)}/healthz"
        try:
            r = await client.get(url)
            return {"service": name, "ok": r.status_code == 200, "detail": r.json().get("status", r.status_code)}
        except (httpx.HTTPError, ValueError) as exc:
            return {"service": name, "ok": False, "detail": f"unreachable ({type(exc).__name__})"}

    # Plain http on loopback: no TLS context to build (that alone costs tens of ms).
    async with httpx.AsyncClient(timeout=1.0, verify=False, trust_env=False) as client:
        return list(await asyncio.gather(*(one(client, n) for n in PORT_OFFSETS)))


@router.get("/status")
async def status(request: Request, user: UserDep) -> Response:
    """Each service's health, the writer's lag, the bus; store counts for root.

    The three are asked at once (the screen waits for the slowest, not for their sum).
    """
    nc = ctx_of(request).nc

    async def writer_lag() -> int | None:
        try:
            return await ctx_of(request).bus.writer_lag()
        except AimemError:
            return None

    async def store_counts() -> dict[str, Any] | None:
        return await read(request, status_reads.status) if user.principal.is_root else None

    async def sparklines() -> list[dict[str, Any]]:
        sampler = ctx_of(request).web_health
        series = await sampler.series() if sampler is not None else {k: [] for k in health.SERIES}
        return [{"id": f"hl-{key}", "label": label, "unit": unit, "s": layout.sparkline(series[key])}
                for key, label, unit in HEALTH_LINES]

    lag, services, store, lines = await asyncio.gather(writer_lag(), _service_health(request), store_counts(),
                                                       sparklines())
    sampler = ctx_of(request).web_health
    source = ("Prometheus" if sampler.prometheus else f"sampled every {sampler.interval_s:g} s") if sampler else "off"
    return renderer(request).page(request, "status.html", services=services, lag=lag, store=store,
                                  health_lines=lines, health_source=source,
                                  bus={"connected": nc.is_connected, "url": ctx_of(request).settings.bus.nats_url})


@router.get("/audit")
async def audit_log(request: Request, user: UserDep, op: str | None = None,
                    before: DbId | None = None) -> Response:
    """The audit log, newest first, 100 a screen (``before`` pages back, ``op`` filters)."""
    require_root(user)
    rows = await read(request, audit.list_audit, limit=AUDIT_PAGE, op=op or None, before_id=before)
    return renderer(request).page(request, "audit.html", rows=rows, op=op or "",
                                  older=rows[-1]["id"] if len(rows) == AUDIT_PAGE else None)
