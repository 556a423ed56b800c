"""Page writes for operators: ``POST /admin/pages`` and ``DELETE /admin/pages``.

``/api/v1`` is read-only; the CLI's ``write-page``/``delete-page`` come here. Each call is
one writer op (``page.write``/``page.delete``) answered after commit.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict

from aimem_query.deps import send
from aimem_common.models import DbIdOrZero

router = APIRouter()


class PageWriteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str = "default"
    project: str
    path: str
    body: str
    title: str | None = None
    frontmatter: dict[str, Any] = {}
    create_only: bool = False
    expected_page_id: DbIdOrZero | None = None


@router.post("/pages")
async def write_page(body: PageWriteBody, request: Request) -> dict:
    """Create or supersede one page (conditional with ``create_only``/``expected_page_id``)."""
    payload = body.model_dump(exclude={"workspace", "project"})
    return await send(request, "page.write", payload, workspace=body.workspace, project=body.project, timeout_s=30)


@router.delete("/pages")
async def delete_page(
    request: Request, project: str, path: str, workspace: str = Query("default")
) -> dict:
    """Delete the live page at ``path`` (idempotent)."""
    return await send(request, "page.delete", {"path": path}, workspace=workspace, project=project, timeout_s=30)
