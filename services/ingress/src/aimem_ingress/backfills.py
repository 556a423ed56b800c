"""``POST /hook/backfill/claim`` and ``POST /hook/backfill/finish``: backfill on start.

The hook client's detached import (``aimem_cli.backfill``) asks before it reads anything and
reports when it is done; each route is one writer round trip (docs/lifecycle.md "Backfill on
start"). The query is the hook client's identity (``workspace``, ``project``, ``root``,
``origin``, ``repo_id``, ``named``), checked like the launcher's routes, with the same
credentials and project grants as a hook (``require_hook_write``).

- ``claim`` ``{agent, session_id?}`` → ``{claimed, reason?, backfill}`` (``backfill.claim``:
  once per project, only while it has nothing yet);
- ``finish`` ``{state: done|failed, files, sessions, events, new_events, truncated, error?}``
  → ``{backfill}`` (404 ``backfill_not_found`` without a claim).

400 for a body that is not the op's payload, 401/403 as for ``/hook``, 503/504 when the
writer does not answer in ``ROUTE_TIMEOUT_S``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from aimem_ingress.deps import CtxDep
from aimem_ingress.workstreams import relay

router = APIRouter()


@router.post("/hook/backfill/claim")
async def claim(request: Request, ctx: CtxDep) -> JSONResponse:
    """Claim the project's one backfill of local history (see the module docstring)."""
    return await relay(ctx, request, "backfill.claim")


@router.post("/hook/backfill/finish")
async def finish(request: Request, ctx: CtxDep) -> JSONResponse:
    """Record what the project's backfill did (see the module docstring)."""
    return await relay(ctx, request, "backfill.finish")
