"""Backfill-on-start ops: claiming a project's one import of local history, and its outcome.

The first session start of a project that has nothing yet imports that repository's local
history of its client once (docs/lifecycle.md "Backfill on start"). The hook client's detached
import asks the writer first (``backfill.claim``); the row the claim writes is the durable
"at most once" marker, and ``backfill.finish`` records what the import did, for status.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText

AGENT = r"^[a-z0-9][a-z0-9-]{0,31}$"


@register("backfill.claim", creates_scope=True)
class BackfillClaim(OpPayload):
    """Take the project's backfill for ``agent``'s history, if the project has nothing yet.

    Claimed only when the project has no backfill row, no live page and no session other
    than ``session_id`` (the live session whose start asks). Result ``{claimed: bool,
    reason?: "already" | "not_empty", backfill: {...}}``.
    """

    agent: str = Field(pattern=AGENT)
    session_id: str | None = Field(None, max_length=256)


@register("backfill.finish")
class BackfillFinish(OpPayload):
    """Record the outcome of the project's claimed backfill (counts as the import saw them)."""

    state: Literal["done", "failed"]
    files: int = Field(0, ge=0)
    sessions: int = Field(0, ge=0)
    events: int = Field(0, ge=0)
    new_events: int = Field(0, ge=0)
    truncated: bool = False
    error: FreeText | None = Field(None, max_length=500)
