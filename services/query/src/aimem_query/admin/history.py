"""Wiki history routes: ``GET /admin/checkpoints`` and ``POST /admin/restore-page``.

Checkpoints are the wiki's git commits, read here with pygit2 without writing anything
(no index, no lock, no ref update), newest first. Restoring sends ``page.restore`` to the
writer, which reads the blob at the checkpoint (or a retained page version) and writes it
back as the page's new latest version (``aimem restore-page``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.errors import BadRequestError
from aimem_common.models import validate_page_path
from aimem_query.deps import read, resolve_scope, send, settings_of
from aimem_common.models import DbId

router = APIRouter()

MAX_CHECKPOINTS = 1000
MAX_WALK = 5000  # commits walked when filtering by path: bounds the request's time


def list_checkpoints(wiki_dir: Path, *, limit: int, prefix: str | None) -> list[dict[str, Any]]:
    """Return up to ``limit`` commits of the wiki repo, newest first (read-only).

    With ``prefix`` (``<ws_id>/<pj_id>/<path>``), only commits that changed that file
    (including the one that deleted it). Blocking; run off the event loop.
    """
    import pygit2

    if not (wiki_dir / ".git").exists():
        return []
    try:
        repo = pygit2.Repository(str(wiki_dir))
    except pygit2.GitError:
        return []
    if repo.head_is_unborn:
        return []
    out: list[dict[str, Any]] = []
    walked = 0
    for commit in repo.walk(repo.head.target, pygit2.enums.SortMode.TIME):
        walked += 1
        if prefix is not None:
            if walked > MAX_WALK:
                break
            mine = _blob_id(commit.tree, prefix)
            parents = commit.parents
            theirs = _blob_id(parents[0].tree, prefix) if parents else None
            if mine == theirs:
                continue
        out.append(
            {
                "oid": str(commit.id),
                "short": str(commit.id)[:10],
                "message": commit.message.strip(),
                "time": datetime.fromtimestamp(commit.commit_time, UTC).isoformat(),
                "author": commit.author.name,
            }
        )
        if len(out) >= limit:
            break
    return out


def _blob_id(tree, path: str):
    try:
        return tree[path].id
    except KeyError:
        return None


@router.get("/checkpoints")
async def checkpoints(
    request: Request,
    limit: int = Query(50, ge=1, le=MAX_CHECKPOINTS),
    workspace: str = "default",
    project: str | None = None,
    path: str | None = None,
) -> dict:
    """List wiki checkpoints newest first; with ``project`` + ``path`` only that page's."""
    prefix = None
    if path is not None:
        if project is None:
            raise BadRequestError("path needs project", code="bad_request")
        norm = validate_page_path(path)
        wid, pid = await read(request, resolve_scope, workspace, project)
        prefix = f"{wid}/{pid}/{norm}"
    wiki = settings_of(request).wiki_dir
    items = await asyncio.to_thread(list_checkpoints, wiki, limit=limit, prefix=prefix)
    return {"checkpoints": items, "count": len(items)}


class RestorePageBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    workspace: str = "default"
    project: str
    path: str | None = None
    rev: str | None = Field(None, alias="from")
    page_id: DbId | None = None


@router.post("/restore-page")
async def restore_page(body: RestorePageBody, request: Request) -> dict:
    """Write one page back from a checkpoint (``from``) or a retained version (``page_id``)."""
    payload = {"path": body.path, "rev": body.rev, "page_id": body.page_id}
    return await send(request, "page.restore", payload, workspace=body.workspace, project=body.project)
