"""Handoff ops: begin / accept (claim once) / cancel."""

from __future__ import annotations

from pydantic import Field, model_validator

from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText
from aimem_common.commands.workstreams import RUN_ID
from aimem_common.models import DbId


@register("handoff.begin", creates_scope=True)
class HandoffBegin(OpPayload):
    """Open a manual handoff for the next agent (manual beats automatic on accept)."""

    body: FreeText = Field(min_length=1, max_length=16 * 1024)
    title: FreeText | None = Field(None, max_length=512)
    cwd: str | None = Field(None, max_length=4096)
    to_agent: str | None = Field(None, max_length=64)
    from_agent: str | None = Field(None, max_length=64)
    session_id: str | None = Field(None, max_length=256)
    shared: bool = False


@register("handoff.accept")
class HandoffAccept(OpPayload):
    """Claim exactly one open handoff: ``handoff_id`` or the best eligible for the place.

    The place is the envelope scope's ``root`` (the repository, sent by the hook client)
    when both sides know it, else ``cwd`` (equal, or a parent on a path boundary).
    Manual handoffs first, then the newest automatic one by event time (``event_at``;
    arrival only breaks ties). Claiming an automatic handoff supersedes the older automatic
    ones of its chain (sessions that ended before a later one began: listed in the result's
    ``folded``) and delivers with it those of sessions that ran in parallel (``parallel``);
    manual ones stay open. An automatic handoff is visible to every actor (it belongs to
    its place). ``only_new_session`` (session starts through ``/hook``): claim nothing when
    ``session_id`` is already known in the project with any event but its starts (a resumed
    or already open session) or is a child session. Result ``{"handoff": {...}|null,
    "superseded": [ids], "workspace", "project"}`` (the project's actual names), plus
    ``skipped`` (``"session_known"``, ``"child_session"``) when ``only_new_session`` refused.
    """

    handoff_id: DbId | None = None
    cwd: str | None = Field(None, max_length=4096)
    agent: str | None = Field(None, max_length=64)
    session_id: str | None = Field(None, max_length=256)
    only_new_session: bool = False
    any_owner: bool = False  # root recovering another operator's private handoff (checked by the caller)
    # A managed start (``aimem run``) claims its workstream packet in the same transaction:
    # the run's harness cursor moves to ``through_seq`` with the handoff claim, or neither
    # moves (``workstream.deliver``'s rules and errors; result key ``delivered``).
    run_id: str | None = Field(None, pattern=RUN_ID)
    through_seq: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _delivery_pair(self) -> "HandoffAccept":
        if (self.run_id is None) != (self.through_seq is None):
            raise ValueError("run_id and through_seq go together")
        return self


@register("handoff.cancel")
class HandoffCancel(OpPayload):
    """Expire an exact open handoff id (``any_owner``: whoever owns it; root only, checked by
    the caller, like ``handoff.accept``'s)."""

    handoff_id: DbId
    any_owner: bool = False
