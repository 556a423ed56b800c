"""On-demand maintainer jobs over NATS request/reply (core NATS, not JetStream).

The mcp-gateway (and the admin API) ask the maintainer to run a job *now* and wait for its
answer; the maintainer subscribes to each subject in a queue group so several replicas share
the work. A job the maintainer runs itself (sweep, lint, consolidation, auto-improve) still
writes only through the writer (commands on ``aimem.mut.*``).

Wire contract:

* subject ``aimem.maint.<job>`` for ``job`` in ``JOBS``;
* request JSON ``{"workspace", "project", "actor", "args": {...}}`` with the W3C
  ``traceparent`` header of the caller's span;
* reply JSON ``{"ok": true, "result": {...}}`` or
  ``{"ok": false, "error": {"code", "message", "data"?, "status"}}``: the bus's one reply
  shape (``bus.make_reply`` / ``bus.parse_reply``, without ``cmd_id``).

A job that needs an LLM answers ``ok: false`` with code ``llm_not_configured`` (status 503)
when no provider is configured; ``bootstrap`` answers ``ok: true`` with ``{"mode":
"rule-based"}`` and ``explore`` answers ``ok: true`` with ``{"mode":
"structured"}`` instead so the caller can fall back to the briefing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS

from aimem_common.bus import parse_reply, trace_headers
from aimem_common.errors import BusTimeoutError, UnavailableError

SUBJECT_PREFIX = "aimem.maint"
QUEUE_GROUP = "aimem-maintainer"
JOBS = ("consolidate", "explore", "auto_improve", "forget_sweep", "lint", "status", "embed", "pending_writes",
        "finalize_idle", "bootstrap", "rerank", "auto_improve_report", "curator")

# Default waits in seconds: LLM jobs may take minutes, rule-based ones are quick.
DEFAULT_TIMEOUT_S = {
    "consolidate": 300.0,
    "explore": 120.0,
    "auto_improve": 300.0,
    "forget_sweep": 60.0,
    "lint": 120.0,
    "status": 5.0,  # LLM candidates + circuits, embedder, last runs (for /admin/status)
    "embed": 300.0,  # embedding backfill now
    "pending_writes": 30.0,  # args {action: list|approve|reject, ids?, status?, reason?}
    "finalize_idle": 120.0,  # args {idle_after_s?}: end sessions idle that long (default: config)
    "bootstrap": 120.0,  # args {overview}: the LLM's reading of a rule-based repository overview
    "rerank": 10.0,  # args {query, documents}: reranker = "llm" (callers bound it by rerank.timeout_ms)
    "auto_improve_report": 30.0,  # args {stage?}: read-only report; stage writes _lint/auto-improve-report.md
    "curator": 60.0,  # args {write?}: merge/split/retire findings → _lint/curator.md
}


def subject(job: str) -> str:
    """Return the request subject of ``job``, e.g. ``aimem.maint.forget_sweep``.

    Raises:
        ValueError: ``job`` is not one of ``JOBS``.
    """
    if job not in JOBS:
        raise ValueError(f"unknown maintainer job {job!r}")
    return f"{SUBJECT_PREFIX}.{job}"


def make_request(*, workspace: str, project: str | None, actor: str, args: dict[str, Any]) -> bytes:
    """Encode a job request ``{workspace, project, actor, args}`` as JSON bytes."""
    return json.dumps({"workspace": workspace, "project": project, "actor": actor, "args": args}).encode()


def parse_request(raw: bytes) -> dict[str, Any]:
    """Decode a job request; missing keys get their defaults (``args`` = ``{}``)."""
    msg = json.loads(raw)
    return {
        "workspace": msg.get("workspace") or "default",
        "project": msg.get("project"),
        "actor": msg.get("actor") or "anonymous",
        "args": msg.get("args") or {},
    }


async def call(
    nc: NATS,
    job: str,
    *,
    workspace: str,
    project: str | None,
    actor: str,
    args: dict[str, Any],
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Ask the maintainer to run ``job`` now and wait for its reply (event loop).

    Args:
        nc: a connected NATS client.
        job: one of ``JOBS``.
        timeout_s: wait in seconds (default ``DEFAULT_TIMEOUT_S[job]``).

    Returns the job's ``result`` dict.

    Raises:
        UnavailableError: no maintainer is subscribed (``maintainer_unavailable``) or the
            NATS connection is down.
        BusTimeoutError: no reply in ``timeout_s`` (the job may still be running).
        AimemError subclass: the maintainer answered ``ok: false``.
    """
    timeout = timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S[job]
    data = make_request(workspace=workspace, project=project, actor=actor, args=args)
    try:
        msg = await nc.request(subject(job), data, timeout=timeout, headers=trace_headers())
    except nats.errors.NoRespondersError as exc:
        raise UnavailableError(
            f"no maintainer is running to answer {job}; start the maintainer service and retry",
            code="maintainer_unavailable",
            data={"job": job},
        ) from exc
    except (nats.errors.TimeoutError, asyncio.TimeoutError) as exc:
        raise BusTimeoutError(
            f"the maintainer did not answer {job} within {timeout:g} s; the job may still be running",
            data={"job": job},
        ) from exc
    except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError, OSError) as exc:
        raise UnavailableError(f"NATS connection unavailable: {exc}", code="nats_unavailable") from exc
    return parse_reply(msg.data, "maintainer")
