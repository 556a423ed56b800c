"""``POST /hook/import``: a batch of historical events read from a client's transcripts.

``aimem import`` turns transcript lines into events of the shared vocabulary and posts
them here in batches (one HTTP request per ≤ ``MAX_EVENTS`` events: per-event ``/hook``
posts cannot reach thousands of lines per second). Each event goes through the same
boundary as a live hook: ``normalize`` (the ``generic`` reading, whose event names are the
``ObservationKind`` values), the same UTF-8 caps, ``sanitize()``, and one
``observation.append`` on JetStream with the event's idempotency key as ``Nats-Msg-Id``.
What differs: observations are marked ``imported`` (the writer skips them for a session
that hooks captured live) and an ``{"end": true}`` item becomes a ``historical``
``session.end`` (page with the transcript's own times, no handoff).

Live first (DESIGN.md "Hook ingress"): imported commands travel in the bulk lane
(``aimem.bulk.<op>`` on ``AIMEM_BULK``), which the writer applies only when the live lane has
nothing pending; their back-pressure is the import gate (``ingress.max_import_delay_s`` of
bulk backlog, or the bulk stream full: 429 to the importer, which retries), never the live
one. The batch is read (decoded, validated, normalised, sanitised) by the import worker
process (``aimem_ingress.importwork``, lower OS priority), never on the event loop that
answers live hooks; the loop only awaits it and publishes what it returns.

Before publishing, ingress asks the store what it knows (``aimem_common.read.imports``):
an event whose key the writer has applied is not sent again (``already``), nor one of a
session that hooks captured live (``captured_live``: the writer would skip it anyway).
Both are what the store knew when the batch arrived.

Body (JSON, ≤ ``ingress.max_body_bytes``)::

    {"agent": "claude-code", "workspace": "default", "project": "acme-api",
     "root": "/home/me/acme-api", "origin": "github.com/acme/acme-api", "named": false,
     "events": [{"key": "claude-code:<uuid>:0",
                 "payload": {"hook_event_name": "user-prompt", "session_id": "...",
                             "cwd": "...", "timestamp": "...", "prompt": "..."}},
                {"key": "claude-code:<sid>:end:1234", "end": true,
                 "payload": {"session_id": "...", "cwd": "...", "timestamp": "..."}}]}

``root``/``origin``/``named`` are optional and mean what the hook client's ``/hook`` query
fields of those names mean (``aimem_cli.identity``): the writer keys the project by them,
so an imported session lands in the project its live hooks would have (``api-2`` when two
repositories are both called ``api``). They are checked like the ``/hook`` fields (400
``invalid_field``) and go into every envelope of the batch.

Answer ``202 {"accepted": int, "duplicates": int, "new": int, "already": int,
"captured_live": int, "rejected": [{"index", "code", "message"}], "purged": int}``: ``accepted`` items
(observations and ends) acknowledged, ``duplicates`` of them already there (applied before,
or a JetStream duplicate of an unapplied re-send); of the observation events, ``new`` sent
as new, ``already`` there before, ``captured_live`` not sent (their session was captured by
hooks); ``purged``: events of sessions ``aimem purge-session`` removed, dropped and
counted on their tombstone. A payload that cannot be normalised is rejected alone (counted by the caller as
malformed), never the batch. 400 for a malformed batch, 401, 413, 429 +
``Retry-After`` (stream full or writer lag: retry the whole batch, the keys dedupe), 503.
"""

from __future__ import annotations

import asyncio
from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from aimem_common.bus import BULK
from aimem_common.read.imports import ImportKnown, import_known
from aimem_ingress.body import read_capped
from aimem_ingress.deps import CtxDep
from aimem_ingress.importwork import MAX_EVENTS, Encoded, Segment
from aimem_ingress.routes import HookScope, _authorize, _check_ready, require_hook_write

__all__ = ["MAX_EVENTS", "router"]

router = APIRouter()
# PubAcks in flight per import request (one NATS connection keeps order): few, so that a live
# hook's publish on the same connection waits behind at most this many imported ones.
PUBLISH_CONCURRENCY = 16


@router.post("/hook/import", status_code=202)
async def post_import(request: Request, ctx: CtxDep) -> JSONResponse:
    """Accept a batch of imported transcript events; see the module docstring."""
    principal = await _authorize(ctx, request)
    cfg = ctx.settings.ingress
    # Live first: the batch is read (decoded, validated, normalised, sanitised) in the import
    # worker process (``importwork``), never on this event loop, which live hooks share.
    parsed = await ctx.imports.parse(await read_capped(request, cfg.max_body_bytes),
                                     max_depth=cfg.max_json_depth, principal=principal)
    agent, scope = parsed.agent, parsed.scope
    await require_hook_write(ctx, principal, scope)
    segments, rejected = parsed.segments, parsed.rejected
    segments, purged = _without_purged(ctx, segments)
    _check_ready(ctx)
    ctx.import_gate.check()
    known = await _known(ctx, scope, segments)
    accepted = duplicates = new = already = live = 0
    for observations, end in segments:  # a session end only after its observations' PubAcks
        send = []
        for env in observations:
            if env.idempotency_key in known.applied:
                already += 1
            elif env.session_id in known.live:
                live += 1
            else:
                send.append(env)
        for i in range(0, len(send), PUBLISH_CONCURRENCY):
            chunk = send[i:i + PUBLISH_CONCURRENCY]
            results = await asyncio.gather(*(_publish(ctx, env) for env in chunk))
            dup = sum(r.duplicate for r in results)
            already += dup
            new += len(results) - dup
            for env in chunk:
                ctx.metrics.events.labels(agent, env.kind).inc()
        accepted += len(observations)
        if end is not None:
            accepted += 1
            if end.idempotency_key in known.applied:
                duplicates += 1
            else:
                duplicates += (await _publish(ctx, end)).duplicate
    duplicates += already
    ctx.metrics.responses.labels("202").inc()
    return JSONResponse({"accepted": accepted, "duplicates": duplicates, "new": new, "already": already,
                         "captured_live": live, "rejected": rejected,
                         "purged": purged}, status_code=202)


async def _publish(ctx, cmd: Encoded):
    """Publish one command of a batch on the bulk lane (its PubAck; ``Bus.publish``'s errors)."""
    return await ctx.bus.publish_encoded(cmd.op, cmd.data, msg_id=cmd.dedupe_id, cmd_id=cmd.cmd_id, lane=BULK)


def _without_purged(ctx, segments: list[Segment]
                    ) -> tuple[list[Segment], int]:
    """Drop the events of sessions ingress sees purged (counted as 410s); return what is left
    and how many were dropped. The writer drops any the cache has not seen yet."""
    out, dropped = [], 0
    for observations, end in segments:
        kept = []
        for env in [*observations, *([end] if end is not None else [])]:
            sid = env.session_id
            if ctx.purged.is_purged(sid):
                ctx.purged.note_refused(sid, env.op)
                ctx.metrics.purged.labels("import").inc()
                dropped += 1
            else:
                kept.append(env)
        last = kept[-1] if kept and end is not None and kept[-1] is end else None
        out.append((kept[:-1] if last is not None else kept, last))
    return out, dropped


async def _known(ctx, scope: HookScope, segments: list[Segment]) -> ImportKnown:
    """What the store knows of the batch (applied keys, sessions captured live); nothing known when
    the database cannot be read yet (every event is then sent; the writer dedupes and skips)."""
    keys = [e.idempotency_key for obs, end in segments for e in (*obs, *([end] if end else [])) if e.idempotency_key]
    sids = [e.session_id for obs, _ in segments for e in obs]
    known = await ctx.read(partial(import_known, workspace=scope.workspace, project=scope.project, root=scope.root,
                                   origin=scope.origin, explicit=scope.explicit, keys=keys, session_ids=sids,
                                   repo_id=scope.repo_id))
    return known or ImportKnown()
