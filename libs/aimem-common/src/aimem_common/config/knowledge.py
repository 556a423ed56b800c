"""Sections of how memory is kept, consolidated and recalled.

``[decay]``, ``[maintenance]``, ``[slots]``, ``[consolidation]``, ``[auto_improve]``,
``[retrieval]``. A key the original system had and this version does not implement fails the load
(``_refuse_unsupported``) instead of being silently ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


class DecaySettings(BaseModel):
    """Forget-sweep parameters, ``[decay]`` in config.toml (DESIGN.md "Decay")."""

    model_config = {"populate_by_name": True}

    lambda_: float = Field(0.02, alias="lambda")
    sigma: float = 0.6
    mu: float = 0.04
    cold_threshold: float = 0.20
    hard_delete_after_days: int = 180
    breadth_weight: float = 0.0
    observation_retention_days: int = 0
    observation_prune_batch: int = 5000
    salience_default: float = 1.0
    # Monthly hook ledgers (wiki/<ws>/<project>/log-YYYY-MM.md) older than this many months
    # are deleted by the sweep; 0 keeps them all. The current and previous month are never.
    ledger_retention_months: int = Field(0, ge=0, le=1200)


class MaintenanceSettings(BaseModel):
    """Schedules of the maintainer's background jobs."""

    sweep_interval_s: int = 6 * 3600
    lint_interval_s: int = 24 * 3600
    embed_interval_s: int = 600
    consolidation_poll_s: float = 5.0
    lease_ttl_s: int = 300
    # A session with no event for this long is finalised through the session-end path
    # (agents killed without a session end: Ctrl-C, a crash, a closed terminal).
    session_idle_after_s: float = Field(3600.0, gt=0)
    idle_check_interval_s: float = Field(300.0, gt=0)


def _refuse_unsupported(section: str, data: Any, accepted: dict[str, Any]) -> Any:
    """Refuse a key this version reads nowhere (a setting must have an effect or fail load).

    ``accepted`` maps each such key to the one value that matches what this version does
    (``...``: none does); that value is accepted and dropped, any other fails the load.
    """
    if not isinstance(data, dict):
        return data
    for key, ok in accepted.items():
        if key in data:
            value = data[key]
            if ok is not ... and _same(value, ok):
                data = {k: v for k, v in data.items() if k != key}
                continue
            raise ValueError(
                f"[{section}] {key} = {value!r} is not supported by this version of aimem "
                f"(nothing reads it); remove it from config.toml / the AIMEM_{section.upper()}__"
                f"{key.upper()} environment"
            )
    return data


def _same(value: Any, ok: Any) -> bool:
    if isinstance(ok, bool) and isinstance(value, str):  # from the environment
        return value.strip().lower() in (("false", "0", "no", "off") if not ok else ("true", "1", "yes", "on"))
    return value == ok


class SlotSettings(BaseModel):
    """``[slots]``: the original's ``per_user = true`` (each operator's own slots in its agents'
    context) is not implemented; ``false`` is what this version does and is accepted."""

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        return _refuse_unsupported("slots", data, {"per_user": False})


class ConsolidationSettings(BaseModel):
    """``[consolidation]``: the maintainer's LLM pass over a finished session (``aimem_maintainer.consolidate``)."""

    enabled: bool = True  # runs only when an LLM provider is configured
    max_input_tokens: int = Field(100_000, ge=6000)
    max_output_tokens: int = Field(32_000, ge=1000)
    related_pages: int = 8
    max_attempts: int = 4
    retry_base_s: float = 30.0  # backoff after a failed attempt: base·2^(attempts−1), ≤ 1 h


class AutoImproveScheduler(BaseModel):
    """``[auto_improve.scheduler]``: how often auto-improve looks for sessions to review, and how many."""

    enabled: bool = True
    interval_secs: int = 3600
    max_sessions_per_tick: int = 1
    min_session_age_secs: int = 600


class AutoImproveEval(BaseModel):
    """The executable gate of auto-improve (``[auto_improve.eval]``): run by the maintainer
    only, never on a hook path, for proposals whose path starts with one of ``prefixes``."""

    enabled: bool = False
    command: list[str] = Field(default_factory=list)  # argv; the proposal JSON arrives on stdin
    prefixes: list[str] = Field(default_factory=lambda: ["_rules/", "procedures/"])
    timeout_s: float = Field(30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _command(self) -> "AutoImproveEval":
        if self.enabled and not self.command:
            raise ValueError("[auto_improve.eval] enabled needs command = [\"executable\", ...]")
        return self


class AutoImproveSettings(BaseModel):
    require_approval: bool = False
    min_observations: int = 8
    min_session_duration_secs: int = 120
    min_confidence: float = 0.75
    max_input_tokens: int = 24_000
    max_proposals_per_run: int = 5  # pages one review may patch
    max_edits_per_proposal: int = Field(8, ge=1, le=100)  # edits over all pages of one review
    max_changed_chars: int = Field(6_000, ge=1)  # removed + added characters over one review
    rejection_context: int = Field(8, ge=0, le=50)  # newest rejected proposals given back to the model
    max_final_body_chars: int = 32_000
    proposal_actor: str = "auto_improve"
    scheduler: AutoImproveScheduler = AutoImproveScheduler()
    eval: AutoImproveEval = AutoImproveEval()

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        # Staged proposals live in the pending_writes table, never under a wiki path.
        return _refuse_unsupported("auto_improve", data, {"pending_path": ...})


class RetrievalSettings(BaseModel):
    """``[retrieval]``. The original's opt-in ``query_intent`` (session-recall routing),
    its ``session_recall_bonus`` and ``abstract_vectors`` (an RRF stream over frontmatter
    abstracts) are not implemented: ``false`` is accepted, anything else fails the load."""

    rrf_k: int = 60
    raw_fallback_limit: int = 10

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        return _refuse_unsupported("retrieval", data, {"query_intent": False, "abstract_vectors": False,
                                                       "session_recall_bonus": ...})
