"""``GET /admin/status`` (store counts, versions, sizes, writer lag) and ``GET /admin/audit``."""

from __future__ import annotations

import asyncio
import sqlite3
from importlib import metadata
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request

from aimem_common import maint_rpc
from aimem_common.bus import BULK
from aimem_common.db.connect import schema_version
from aimem_common.read import audit as audit_rows
from aimem_common.read.backfills import list_backfills
from aimem_common.read import scopes
from aimem_common.read.status import project_sizes
from aimem_common.replication import read_status as read_replication_status
from aimem_query.deps import bus_of, read, settings_of
from aimem_query.admin.history import list_checkpoints
from aimem_common.read import dead_letters, tombstones

router = APIRouter()

MIRRORS_STATUS_TIMEOUT_S = 2.0

_COUNTS = {
    "pages": "SELECT count(*) FROM pages WHERE is_latest = 1",
    "page_versions": "SELECT count(*) FROM pages",
    "sessions": "SELECT count(*) FROM sessions",
    "observations": "SELECT count(*) FROM observations",
    "handoffs_open": "SELECT count(*) FROM handoffs WHERE status = 'open'",
    "users": "SELECT count(*) FROM users",
    "api_keys": "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL",
    "audit_rows": "SELECT count(*) FROM audit_log",
}


def _store(conn: sqlite3.Connection) -> dict[str, Any]:
    counts = {**scopes.counts(conn), **{k: conn.execute(sql).fetchone()[0] for k, sql in _COUNTS.items()}}
    return {"schema_version": schema_version(conn), "counts": counts, "projects": project_sizes(conn),
            "dead_letters_open": dead_letters.count_open(conn), "purges": tombstones.summary(conn),
            "backfills": list_backfills(conn)}


def _version() -> str:
    try:
        return metadata.version("aimem-query")
    except metadata.PackageNotFoundError:
        return "unknown"


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


@router.get("/status")
async def status(request: Request) -> dict:
    """Counts, schema version, data dir, DB size (bytes, with WAL), last checkpoint, lag
    (``writer_lag``: live commands waiting; ``import_lag``: imported ones, applied after them).

    ``replication`` (``{}`` when not configured): the off-node copies' state from
    ``aimem_common.replication.read_status`` — per target (``db``, ``wiki``) ``lag_s`` and
    ``behind`` (lag over ``replication.lag_alert_s``). ``mcp.session_idle_timeout_s``: how
    long the gateway keeps a quiet MCP session (the same configuration as the gateway's).
    ``purges``: live purge tombstones by kind and the late events they refused
    (``/admin/purges`` lists them). ``mirrors``: each ``[[mirrors]]`` receiver's delivery state
    from the maintainer (pending, consecutive failures, last error); None when no maintainer
    answers within ``MIRRORS_STATUS_TIMEOUT_S``. ``backfills``: the newest projects' one import
    of local history at their first session start (``aimem_common.read.backfills.public_row``:
    workspace, project, agent, state ``running|done|failed``, times, counts).
    """
    settings = settings_of(request)
    store = await read(request, _store)
    try:
        lag: int | None = await bus_of(request).writer_lag()
        import_lag: int | None = await bus_of(request).writer_lag(BULK)  # imports waiting (live first)
    except Exception:  # status must answer while the bus is down  # noqa: BLE001
        lag = import_lag = None
    last = await asyncio.to_thread(list_checkpoints, settings.wiki_dir, limit=1, prefix=None)
    mirrors: list[dict[str, Any]] | None = []
    if settings.mirrors:
        try:
            maint = await maint_rpc.call(bus_of(request).nc, "status", workspace="default", project=None,
                                         actor="admin", args={}, timeout_s=MIRRORS_STATUS_TIMEOUT_S)
            mirrors = maint.get("mirrors")
        except Exception:  # status must answer without a maintainer  # noqa: BLE001
            mirrors = None
    return {
        "version": _version(),
        "data_dir": str(settings.data_dir),
        "db_bytes": _size(settings.db_path) if settings.db_path.exists() else 0,
        "writer_lag": lag,
        "import_lag": import_lag,
        "last_checkpoint": last[0] if last else None,
        "replication": await asyncio.to_thread(read_replication_status, settings),
        "mcp": {"session_idle_timeout_s": settings.mcp.session_idle_timeout_s},
        "mirrors": mirrors,
        **store,
    }


@router.get("/audit")
async def audit(request: Request, limit: int = Query(50, ge=1, le=1000), op: str | None = None) -> dict:
    """The newest ``limit`` audit rows (optionally one ``op``), newest first."""
    rows = await read(request, lambda c: audit_rows.list_audit(c, limit=limit, op=op))
    return {"audit": rows, "count": len(rows)}
