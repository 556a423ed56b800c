"""The read-only JSON API at ``/api/v1`` (OpenAPI at ``/docs``).

Every route authenticates (``aimem_common.auth``) and checks the per-project read grant.
Project routes live under ``/api/v1/workspaces/{workspace}/projects/{project}/...``.
"""

from __future__ import annotations

from fastapi import APIRouter

from aimem_query.api import export, handoffs, identity, pages, search, sessions, status, workstreams

router = APIRouter(prefix="/api/v1")
for _module in (search, pages, sessions, handoffs, status, export, workstreams, identity):
    router.include_router(_module.router)
