"""``/admin/dead-letters``: list the commands the writer gave up on, and send them again.

* ``GET  /admin/dead-letters?all=false&limit=100`` → ``{"dead_letters": [...], "open": int}``
  (oldest first; ``all`` includes replayed ones).
* ``POST /admin/dead-letters/replay`` ``{"ids": [int]}`` or ``{"all": true}`` →
  ``{"replayed": [ids], "unreadable": [ids]}``: each open dead letter's command is published again, exactly as
  received (its idempotency key too, so a command that did apply meanwhile is answered from
  the writer's stored replies), then marked replayed (``dead_letter.resolve``). A replay
  that fails again becomes a new open dead letter (the message names the row it replays,
  ``bus.REPLAY_HEADER``, so the writer never folds the new failure into the row being
  resolved; the replay is applied before its resolve). A dead letter that is no envelope at all (kept
  as received: a line of a bundle the writer could not read) cannot be sent: it is listed in
  ``"unreadable": [ids]`` and stays open for a person to read.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, ValidationError

from aimem_common.commands import Envelope
from aimem_common.commands import make_envelope
from aimem_common.commands.admin import DeadLetterResolve
from aimem_common.errors import BadRequestError
from aimem_common.read import dead_letters
from aimem_query.deps import bus_of, read
from aimem_common.models import DbId

router = APIRouter()


@router.get("/dead-letters")
async def list_dead_letters(request: Request, all: bool = False, limit: int = Query(100, ge=1, le=10_000)) -> dict:
    """List dead letters (open ones unless ``all``), oldest first, with the open count."""
    rows = await read(request, lambda c: dead_letters.list_dead_letters(c, include_replayed=all, limit=limit))
    n_open = await read(request, dead_letters.count_open)
    return {"dead_letters": rows, "open": n_open}


class ReplayRequest(BaseModel):
    ids: list[DbId] | None = Field(None, min_length=1, max_length=10_000)
    all: bool = False


@router.post("/dead-letters/replay")
async def replay(request: Request, body: ReplayRequest) -> dict:
    """Publish the chosen open dead letters again and mark them replayed; see the module docstring."""
    if (body.ids is None) != body.all:
        raise BadRequestError("send either `ids` or `all: true`", code="bad_request")
    rows = await read(request, dead_letters.envelopes, None if body.all else body.ids)
    if not rows:
        return {"replayed": []}
    bus = bus_of(request)
    stamp = int(time.time() * 1000)
    ids, unreadable = [], []
    for dl_id, raw in rows:
        try:
            env = Envelope.model_validate_json(raw)
        except ValidationError:  # kept as received because it is no envelope: nothing to send
            unreadable.append(dl_id)
            continue
        await bus.publish(env, msg_id=f"{env.dedupe_id}:replay:{dl_id}:{stamp}", replay_of=dl_id)
        ids.append(dl_id)
    if not ids:
        return {"replayed": [], "unreadable": unreadable}
    env = make_envelope("dead_letter.resolve", DeadLetterResolve(ids=ids),
                        actor=getattr(request.state, "admin_actor", None) or "root")
    await bus.request(env)
    return {"replayed": ids, "unreadable": unreadable}
