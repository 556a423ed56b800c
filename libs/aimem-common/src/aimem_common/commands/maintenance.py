"""Maintainer ops: sweep, lint report, consolidation jobs, proposals, embeddings.

The maintainer reads the DB read-only, decides, and sends these commands; the writer
(``aimem_writer.ops.maintenance``) applies them in its single transaction. Every op that
acts on pages takes the **explicit page ids** the maintainer computed, so a dry run (the
same computation without the command) predicts exactly what the real run does. The writer
re-checks each id and skips the ones that changed meanwhile (reported as ``skipped``).

Results (the writer reply's ``result``):

* ``sweep.apply`` → ``{"expired": [ids], "evicted": [ids], "purged": [ids],
  "purged_rows": int, "observations_pruned": int, "skipped": [ids]}``
* ``consolidation.enqueue`` → ``{"job_id": int|None, "created": bool}``
* ``consolidation.lease`` → ``{"jobs": [{id, workspace_id, project_id, workspace, project,
  session_id, generation, attempts}]}``
* ``consolidation.complete`` → ``{"job_id", "pages": [{"path", "page_id"}]}``
* ``consolidation.fail`` → ``{"job_id", "status": "pending"|"parked", "attempts"}``
* ``auto_improve.watermark`` → ``{"watermark_at": str, "created": bool}``
* ``auto_improve.claim`` → ``{"claimed": bool}``
* ``proposal.stage`` → ``{"proposals": [{"id", "path", "status", "applied_page_id"}],
  "rejected": [{"id", "path", "stage", "reason"}]}``
* ``proposal.approve`` / ``proposal.reject`` → ``{"proposals": [{"id", "path", "status",
  "applied_page_id"}]}``
* ``embedding.upsert`` → ``{"upserted": int, "skipped": [page_id]}``
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from aimem_common.models import validate_page_path
from aimem_common.commands.envelope import OpPayload, register
from aimem_common.commands.freetext import FreeText
from aimem_common.commands.pages import PageWrite
from aimem_common.models import DbId

# Directories consolidation and auto-improve may write into: knowledge pages (and, for
# approved proposals, procedures and rules), never sessions/ or a ledger. Consolidation may
# also update a ``state`` slot (``_slots/``); the maintainer never lets it rewrite an
# ``invariant`` one (``aimem_maintainer.consolidate``).
CONSOLIDATION_DIRS = ("concepts/", "decisions/", "gotchas/", "_slots/")
PROPOSAL_DIRS = ("concepts/", "decisions/", "gotchas/", "procedures/", "_rules/")


@register("sweep.apply")
class SweepApply(OpPayload):
    """Apply one forget-sweep plan of the envelope's scope (DESIGN.md "Decay").

    * ``expire_page_ids``: live versions past ``expires_at`` → hard-deleted (file and every
      version row of that path), pinned or not.
    * ``evict_page_ids``: cold live versions → the file is removed and the row becomes a
      tombstone (``is_latest=0``, ``retired_reason='evicted'``, ``superseded_at=now``).
    * ``purge_page_ids``: evicted tombstones older than ``hard_delete_after_days`` → the
      tombstone and its older versions at that path are deleted, plus entity rows left
      orphaned; a newer live page at the same path is preserved.
    * ``prune_observations_before`` (ISO time) with ``prune_session_ids``: delete at most
      ``prune_batch`` raw observations older than that of those sessions, only while the
      session's summary page is still live; ``sessions.observation_count`` and
      ``ended_observation_count`` are lowered by the same amount.
    """

    expire_page_ids: list[DbId] = Field(default_factory=list, max_length=10_000)
    evict_page_ids: list[DbId] = Field(default_factory=list, max_length=10_000)
    purge_page_ids: list[DbId] = Field(default_factory=list, max_length=10_000)
    prune_observations_before: str | None = None
    prune_session_ids: list[str] = Field(default_factory=list, max_length=10_000)
    prune_batch: int = Field(5000, ge=1, le=100_000)
    # ``[decay] ledger_retention_months``: monthly hook ledgers of the scope to delete; the
    # writer skips any of the current or previous month (by its own clock).
    prune_ledgers: list[Annotated[str, Field(pattern=r"^log-\d{4}-\d{2}\.md$")]] = Field(
        default_factory=list, max_length=1200)


@register("consolidation.enqueue")
class ConsolidationEnqueue(OpPayload):
    """Queue one session generation for LLM consolidation (idempotent on
    ``(project, session_id, generation)``)."""

    session_id: str = Field(min_length=1, max_length=256)
    generation: int = Field(ge=0)


@register("consolidation.lease")
class ConsolidationLease(OpPayload):
    """Lease up to ``limit`` due jobs for ``owner`` (global: the envelope scope is unused).

    Due = ``pending`` with ``next_attempt_at`` ≤ now, or ``leased`` with an expired
    ``lease_until`` (recovery after a crash or restart). Leasing increments ``attempts``; an
    expired lease whose job already used ``max_attempts`` is parked instead.
    """

    owner: str = Field(min_length=1, max_length=128)
    lease_ttl_s: int = Field(300, ge=1, le=24 * 3600)
    limit: int = Field(1, ge=1, le=50)
    max_attempts: int = Field(4, ge=1)


@register("consolidation.complete")
class ConsolidationComplete(OpPayload):
    """Write the consolidated pages and mark the job done, in one transaction.

    Each page's ``evidence`` gets ``{"kind": "session", "id": <session_id>}`` added by the
    writer. Refused (``conflict``) when ``owner`` no longer holds the lease.
    """

    job_id: DbId
    owner: str = Field(min_length=1, max_length=128)
    pages: list[PageWrite] = Field(min_length=1, max_length=20)

    @field_validator("pages")
    @classmethod
    def _dirs(cls, pages: list[PageWrite]) -> list[PageWrite]:
        for p in pages:
            if not p.path.startswith(CONSOLIDATION_DIRS):
                raise ValueError(f"consolidation may only write under {CONSOLIDATION_DIRS}: {p.path}")
        return pages


@register("consolidation.fail")
class ConsolidationFail(OpPayload):
    """Record a failed attempt: back to ``pending`` at ``retry_at``, or ``parked`` once
    ``attempts`` ≥ ``max_attempts`` (or ``park`` is set)."""

    job_id: DbId
    owner: str = Field(min_length=1, max_length=128)
    error: str = Field(max_length=2000)
    retry_at: str | None = None
    max_attempts: int = Field(4, ge=1)
    park: bool = False
    # False for a provider outage (every LLM candidate down): the attempt is refunded, so an
    # outage delays the job (``retry_at``) but never parks it.
    count_attempt: bool = True


@register("auto_improve.watermark")
class AutoImproveWatermark(OpPayload):
    """Set the project's first-run watermark if it has none (sessions ended before it are
    history and never reviewed automatically)."""

    watermark_at: str


@register("auto_improve.claim")
class AutoImproveClaim(OpPayload):
    """Claim a session for review before any LLM work (``claimed: false`` if it already has a
    run, unless ``rerun``); a failed review is then not retried forever."""

    session_id: str = Field(min_length=1, max_length=256)
    rerun: bool = False


class ProposalEdit(OpPayload):
    """One edit of a patch: replace the one occurrence of ``find`` in the page's body by
    ``replace``. A new page is one edit with an empty ``find`` whose ``replace`` is its body."""

    find: FreeText = Field("", max_length=64 * 1024)
    replace: FreeText = Field("", max_length=64 * 1024)


class ProposalIn(OpPayload):
    """One validated auto-improve proposal: a patch of one page.

    ``body`` is the page's body after ``patch`` was applied to the live version
    ``target_page_id`` (None: a new page); approval writes ``body`` only while that version
    is still the live one. ``eval`` is the eval gate's answer when the gate ran.
    """

    path: str
    title: FreeText | None = Field(None, max_length=512)
    body: FreeText = Field(min_length=1, max_length=64 * 1024)
    rationale: FreeText | None = Field(None, max_length=4000)
    confidence: float = Field(ge=0.0, le=1.0)
    target_page_id: DbId | None = None  # snapshot of the live page it would replace
    patch: list[ProposalEdit] = Field(default_factory=list, max_length=100)
    eval: dict[str, Any] | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        v = validate_page_path(v)
        if not v.startswith(PROPOSAL_DIRS):
            raise ValueError(f"proposals may only target {PROPOSAL_DIRS}: {v}")
        return v


class RejectedProposalIn(OpPayload):
    """A proposal refused before staging, kept visible as a ``rejected`` row.

    ``stage`` says who refused it: ``validation`` (limits, directories, confidence, a patch
    that does not apply) or ``eval`` (the ``[auto_improve.eval]`` executable). ``path`` is
    stored as the model gave it (it may be an invalid path: that can be the reason)."""

    path: str = Field(max_length=1024)
    title: FreeText | None = Field(None, max_length=512)
    body: FreeText = Field("", max_length=64 * 1024)
    rationale: FreeText | None = Field(None, max_length=4000)
    confidence: float | None = None
    target_page_id: DbId | None = None
    patch: list[ProposalEdit] = Field(default_factory=list, max_length=100)
    stage: Literal["validation", "eval"]
    reason: FreeText = Field(min_length=1, max_length=2000)
    eval: dict[str, Any] | None = None


@register("proposal.stage")
class ProposalStage(OpPayload):
    """Store proposals of one reviewed session; with ``approve`` also write them (one txn).

    ``run_status``/``run_detail`` close the session's ``auto_improve_runs`` row.
    """

    session_id: str | None = Field(None, max_length=256)
    proposals: list[ProposalIn] = Field(default_factory=list, max_length=50)
    rejected: list[RejectedProposalIn] = Field(default_factory=list, max_length=50)
    approve: bool = False
    run_status: Literal["done", "skipped", "failed"] = "done"
    run_detail: str | None = Field(None, max_length=2000)


@register("proposal.approve")
class ProposalApprove(OpPayload):
    """Approve pending proposals: write each through the normal page path."""

    ids: list[DbId] = Field(min_length=1, max_length=100)


@register("proposal.reject")
class ProposalReject(OpPayload):
    """Reject pending proposals (nothing is written)."""

    ids: list[DbId] = Field(min_length=1, max_length=100)
    reason: FreeText | None = Field(None, max_length=2000)


class EmbeddingItem(OpPayload):
    """One page's vector: float32 little-endian, base64, ``dim`` values.

    ``chunks``: the vectors of the page's chunks in order (same encoding), replacing every
    chunk row of the page; empty = the page's chunk rows are left as they are.
    """

    page_id: DbId
    vector_b64: str
    content_hash: str = Field(max_length=128)
    chunks: list[str] = Field(default_factory=list, max_length=256)


@register("embedding.upsert")
class EmbeddingUpsert(OpPayload):
    """Store vectors with their ``{provider, model, dim}`` (replacing any older identity).

    Items whose page is no longer live or whose ``content_hash`` changed are skipped.
    """

    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=256)
    dim: int = Field(ge=1, le=65_536)
    items: list[EmbeddingItem] = Field(min_length=1, max_length=512)
