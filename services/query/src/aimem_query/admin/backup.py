"""``GET /admin/backup``: a gzipped tarball of the live store, streamed back.

The DB is copied with SQLite's online backup API from a read-only connection, so the
writer stays live; the wiki tree (with ``.git``), the managed workstreams' ledger segments
(``raw/workstreams/``) and ``config.toml`` ride along
(``aimem_common.archive`` defines the layout). The archive is built in a temp dir and
deleted once the response has been sent.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from aimem_common.archive import create_backup
from aimem_common.errors import BusTimeoutError, UnavailableError
from aimem_common.commands import make_envelope
from aimem_query.deps import bus_of, settings_of

log = logging.getLogger("aimem.admin.backup")

router = APIRouter()


@router.get("/backup", response_class=FileResponse)
async def backup(request: Request) -> FileResponse:
    """Stream ``aimem-backup-<stamp>.tar.gz`` (``application/gzip``)."""
    return await _backup(request)


@router.post("/backup", response_class=FileResponse, operation_id="backup_post")
async def backup_post(request: Request) -> FileResponse:
    """The same as ``GET /admin/backup``, for clients that POST an action."""
    return await _backup(request)


async def _backup(request: Request) -> FileResponse:
    settings = settings_of(request)
    # Let the writer commit its debounced git checkpoint first: the archived repository
    # then has no uncommitted files and a restore reproduces the history exactly.
    try:
        await bus_of(request).request(make_envelope("wiki.checkpoint", {}, actor="admin"), timeout_s=10)
    except (BusTimeoutError, UnavailableError) as exc:  # no answer, or the writer's git commit failed
        log.warning("backup: the writer did not confirm a checkpoint (%s); archiving the wiki as it is", exc.code)
    work = Path(tempfile.mkdtemp(prefix="aimem-backup-"))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = work / f"aimem-backup-{stamp}.tar.gz"
    try:
        manifest = await asyncio.to_thread(create_backup, settings.data_dir, settings.db_path, out, work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return FileResponse(
        out,
        media_type="application/gzip",
        filename=out.name,
        headers={"X-Aimem-Schema-Version": str(manifest.get("schema_version", ""))},
        background=BackgroundTask(shutil.rmtree, work, True),
    )
