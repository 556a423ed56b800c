"""Wiki history routes: ``GET /admin/checkpoints`` and ``POST /admin/restore-page``.

Checkpoints are the wiki's git commits, read here with pygit2 without writing anything
(no index, no lock, no ref update), newest first. A page's own checkpoints come from a
``CheckpointLog`` kept by the process (which commits changed which file), extended as the
writer's checkpoints move HEAD. Restoring sends ``page.restore`` to the
writer, which reads the blob at the checkpoint (or a retained page version) and writes it
back as the page's new latest version (``aimem restore-page``).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.errors import BadRequestError
from aimem_common.models import validate_page_path
from aimem_query.deps import read, resolve_scope, send, settings_of
from aimem_common.models import DbId
from aimem_common.wikihistory import (  # noqa: F401  (re-exported: status, web, tests)
    MAX_CHECKPOINTS,
    MAX_WALK,
    CheckpointLog,
    _log_of,
    list_checkpoints,
)

router = APIRouter()

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


class CheckpointBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str | None = Field(None, min_length=1, max_length=200)


@router.post("/checkpoint")
async def checkpoint(body: CheckpointBody, request: Request) -> dict:
    """Commit the wiki's pending changes now (``aimem commit``); ``message`` becomes the
    commit's subject. ``{"commit": oid|null, "head": oid|null}`` (null commit: nothing to commit)."""
    result = await send(request, "wiki.checkpoint", {"message": body.message})
    wiki = settings_of(request).wiki_dir
    head = await asyncio.to_thread(list_checkpoints, wiki, limit=1, prefix=None)
    return {"commit": result.get("commit"), "head": head[0]["oid"] if head else None}


def db_bytes(db_path) -> dict[str, int]:
    """Sizes of the DB file and its ``-wal`` / ``-shm`` companions (0 when absent)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        try:
            out["db" + suffix.replace("-", "_")] = (db_path.parent / (db_path.name + suffix)).stat().st_size
        except OSError:
            out["db" + suffix.replace("-", "_")] = 0
    out["total"] = sum(out.values())
    return out


@router.post("/compact")
async def compact(request: Request) -> dict:
    """Rebuild the text indexes, VACUUM and checkpoint the WAL to zero, through the writer
    (``aimem compact``). ``{bytes_before, bytes_after, fts_rebuilt, vacuum}`` (bytes of the
    DB file, its WAL and shared-memory file, and their total)."""
    db_path = settings_of(request).db_path
    before = db_bytes(db_path)
    result = await send(request, "db.compact", {})
    return {"bytes_before": before, "bytes_after": db_bytes(db_path), **result}
