"""Managed-workstream ops: the run lease, appending to the ledger, delivery cursors, renaming.

The workstream of a command is the project of its envelope scope plus a checkout root
(``checkout_root``, else the scope's ``root``, else ``cwd``): one per repository or
worktree checkout. Every text is ``FreeText`` (redacted on validation, in the caller and
again in the writer).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText
from aimem_common.workstreams import LEASE_SECONDS

RUN_ID = r"^[0-9a-f]{32}$"
HARNESS = r"^[a-z0-9][a-z0-9-]{0,31}$"


@register("workstream.lease", creates_scope=True)
class WorkstreamLease(OpPayload):
    """Open, renew, release or cancel a run's lease on its checkout's workstream.

    ``open`` creates the workstream when missing and refuses (409 ``workstream_leased``)
    while another run holds an unexpired lease; ``harness`` may be left out on ``open``
    (the newest harness of the workstream is taken, 400 ``no_harness`` when there is none);
    ``usable`` then names the harnesses the launcher can start on its machine (their binary
    is on its PATH): the newest of those is taken, 400 ``no_harness`` when none is.
    """

    action: Literal["open", "renew", "release", "cancel"]
    run_id: str = Field(pattern=RUN_ID)
    harness: str | None = Field(None, pattern=HARNESS)
    cwd: str | None = Field(None, max_length=4096)
    checkout_root: str | None = Field(None, max_length=4096)
    exit_code: int | None = None
    lease_s: int = Field(LEASE_SECONDS, ge=5, le=600)  # open/renew: how long the lease lasts
    usable: list[Annotated[str, Field(pattern=HARNESS)]] | None = Field(None, max_length=16)


class LedgerEvent(BaseModel):
    """One visible transcript event to append."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "tool", "checkpoint"]
    text: FreeText = Field(min_length=1, max_length=16 * 1024)
    ts: str | None = Field(None, max_length=64)
    source_key: str | None = Field(None, max_length=256)


@register("workstream.append")
class WorkstreamAppend(OpPayload):
    """Append events of one run (its harness) to the run's workstream, in order.

    Events whose ``source_key`` is already in the workstream are skipped (a retried import);
    events carrying an origin marker are refused one by one (listed in ``rejected``).
    """

    run_id: str = Field(pattern=RUN_ID)
    native_session_id: str | None = Field(None, max_length=256)
    events: list[LedgerEvent] = Field(max_length=2000)


@register("workstream.deliver")
class WorkstreamDeliver(OpPayload):
    """Advance a harness's delivery cursor to ``through_seq`` (never backwards)."""

    run_id: str = Field(pattern=RUN_ID)
    through_seq: int = Field(ge=0)


@register("workstream.rename")
class WorkstreamRename(OpPayload):
    """Give a workstream of the scope's project a new display name."""

    workstream_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    name: FreeText = Field(min_length=1, max_length=128)
    force: bool = False  # rename although a run holds a live lease (409 ``live_lease`` otherwise)


@register("workstream.delete")
class WorkstreamDelete(OpPayload):
    """Delete a workstream of the scope's project with its whole ledger (events, raw JSONL
    segments, runs and delivery cursors); ``dry_run`` only counts what would go."""

    workstream_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    dry_run: bool = False
    force: bool = False  # delete although a run holds a live lease (409 ``live_lease`` otherwise)
