"""The forget sweep: plan (pure, read-only) and apply (one ``sweep.apply`` per scope).

``plan_sweep`` computes, for one scope at one instant, exactly which page ids each pass
acts on:

1. TTL: live pages whose ``expires_at`` ≤ now → hard delete (beats pinning).
2. Cold: live episodic, unpinned, non-``_slots/`` pages with ``retention < cold_threshold``
   → evicted (file removed, tombstone row kept).
3. Purge: evicted tombstones older than ``hard_delete_after_days`` → deleted with their
   older versions (a newer page at the same path survives).
4. Prune (opt-in, ``observation_retention_days > 0``): raw observations older than that,
   only of sessions whose summary page is live and not acted on by this run.

A dry run returns the plan; a real run sends the same ids, so the dry run predicts it
exactly (the writer skips, and reports, ids that changed between plan and apply).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aimem_common.config import DecaySettings
from aimem_common.models import Scope
from aimem_common.decay import is_cold, retention

from aimem_maintainer.store import days_between, parse_time

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext


@dataclass(slots=True)
class Planned:
    page_id: int
    path: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SweepPlan:
    """What one sweep of one scope does (``as_dict`` is the dry-run answer)."""

    workspace: str
    project: str
    at: str
    expire: list[Planned] = field(default_factory=list)
    evict: list[Planned] = field(default_factory=list)
    purge: list[Planned] = field(default_factory=list)
    prune_before: str | None = None
    prune_sessions: list[str] = field(default_factory=list)
    prune_observations: int = 0
    ledgers: list[str] = field(default_factory=list)  # monthly hook ledgers past [decay] ledger_retention_months

    @property
    def empty(self) -> bool:
        return not (self.expire or self.evict or self.purge or self.prune_observations or self.ledgers)

    def ids(self) -> dict[str, list[int]]:
        return {
            "expired": sorted(p.page_id for p in self.expire),
            "evicted": sorted(p.page_id for p in self.evict),
            "purged": sorted(p.page_id for p in self.purge),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "project": self.project,
            "at": self.at,
            **self.ids(),
            "expire": [asdict(p) for p in self.expire],
            "evict": [asdict(p) for p in self.evict],
            "purge": [asdict(p) for p in self.purge],
            "observations_pruned": self.prune_observations,
            "prune_sessions": self.prune_sessions,
            "ledgers": self.ledgers,
            "counts": {
                "ledgers_pruned": len(self.ledgers),
                "expired": len(self.expire),
                "evicted": len(self.evict),
                "purged": len(self.purge),
                "observations_pruned": self.prune_observations,
            },
        }


def page_retention(decay: DecaySettings, row: sqlite3.Row, now: datetime, distinct_actors: int = 1) -> float:
    """Retention of one page row at ``now`` (Δt from ``updated_at``, the version's write)."""
    written = parse_time(row["updated_at"]) or now
    return retention(
        decay,
        salience=row["salience"],
        age_days=days_between(now, written) or 0.0,
        access_count=int(row["access_count"] or 0),
        days_since_access=days_between(now, parse_time(row["last_accessed_at"])),
        distinct_actors=distinct_actors,
    )


def decays(row: sqlite3.Row) -> bool:
    """Only episodic, unpinned pages outside ``_slots/`` decay (DESIGN.md "Decay")."""
    return row["tier"] == "episodic" and not row["pinned"] and not str(row["path"]).startswith("_slots/")


def plan_sweep(conn: sqlite3.Connection, scope: Scope, decay: DecaySettings, now: datetime | None = None) -> SweepPlan:
    """Compute the sweep plan of ``scope`` at ``now`` (read-only; no side effects)."""
    now = now or datetime.now(UTC)
    plan = SweepPlan(scope.workspace, scope.project, now.isoformat())
    live = conn.execute(
        "SELECT id, path, tier, pinned, salience, expires_at, access_count, last_accessed_at, updated_at "
        "FROM pages WHERE project_id = ? AND is_latest = 1 ORDER BY id",
        (scope.project_id,),
    ).fetchall()
    actors: dict[int, int] = {}
    if decay.breadth_weight > 0:
        actors = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT a.page_id, COUNT(*) FROM page_access a JOIN pages p ON p.id = a.page_id "
                "WHERE p.project_id = ? AND p.is_latest = 1 GROUP BY a.page_id",
                (scope.project_id,),
            )
        }
    acted: set[int] = set()
    for row in live:
        exp = parse_time(row["expires_at"])
        if exp is not None and exp <= now:
            plan.expire.append(Planned(row["id"], row["path"], {"expires_at": row["expires_at"]}))
            acted.add(row["id"])
            continue
        if not decays(row):
            continue
        score = page_retention(decay, row, now, actors.get(row["id"], 1))
        if is_cold(decay, score):
            plan.evict.append(Planned(row["id"], row["path"], {"retention": round(score, 6)}))
            acted.add(row["id"])
    cutoff = now - timedelta(days=decay.hard_delete_after_days)
    for row in conn.execute(
        "SELECT id, path, superseded_at FROM pages WHERE project_id = ? AND is_latest = 0 "
        "AND retired_reason = 'evicted' AND superseded_at IS NOT NULL ORDER BY id",
        (scope.project_id,),
    ):
        t = parse_time(row["superseded_at"])
        if t is not None and t <= cutoff:
            plan.purge.append(Planned(row["id"], row["path"], {"evicted_at": row["superseded_at"]}))
    if decay.observation_retention_days > 0:
        before = (now - timedelta(days=decay.observation_retention_days)).isoformat()
        plan.prune_before = before
        rows = conn.execute(
            "SELECT s.session_id, s.summary_page_id, COUNT(o.id) AS n FROM sessions s "
            "JOIN pages p ON p.id = s.summary_page_id AND p.is_latest = 1 "
            "JOIN observations o ON o.project_id = s.project_id AND o.session_id = s.session_id "
            "AND julianday(o.occurred_at) < julianday(?) WHERE s.project_id = ? GROUP BY s.session_id ORDER BY s.session_id",
            (before, scope.project_id),
        ).fetchall()
        for r in rows:
            if r["summary_page_id"] in acted:
                continue  # this run removes the summary: raw capture stays the last copy
            plan.prune_sessions.append(r["session_id"])
            plan.prune_observations += int(r["n"])
    return plan


def old_ledgers(project_dir: Path, months: int, now: datetime) -> list[str]:
    """Names of the monthly hook ledgers (``log-YYYY-MM.md``) in ``project_dir`` older than
    ``months`` months before ``now`` (0: none); the current and previous month never."""
    if months <= 0 or not project_dir.is_dir():
        return []
    index = now.year * 12 + now.month - 1  # months since year 0 of the current month
    keep_from = index - max(months - 1, 1)  # this month and the (months-1) before it; at least 2
    out = []
    for p in project_dir.glob("log-[0-9][0-9][0-9][0-9]-[0-9][0-9].md"):
        y, m = int(p.name[4:8]), int(p.name[9:11])
        if 1 <= m <= 12 and y * 12 + m - 1 < keep_from and p.is_file():
            out.append(p.name)
    return sorted(out)


async def run_sweep(ctx: "MaintContext", scope: Scope, *, dry_run: bool, now: datetime | None = None
                    ) -> dict[str, Any]:
    """Plan the sweep of ``scope``; unless ``dry_run``, apply it through the writer.

    Returns the plan (dry run) or the writer's counts merged with the plan's ids. The
    observation prune is sent in ``observation_prune_batch`` slices until nothing is left.
    """
    decay = ctx.settings.decay
    plan = await ctx.read_pool.run(lambda conn: plan_sweep(conn, scope, decay, now))
    plan.ledgers = old_ledgers(ctx.settings.wiki_dir / scope.workspace_id / scope.project_id,
                               decay.ledger_retention_months, now or datetime.now(UTC))
    out = plan.as_dict()
    out["dry_run"] = dry_run
    if dry_run or plan.empty:
        out["applied"] = False if dry_run else {"expired": [], "evicted": [], "purged": [], "observations_pruned": 0}
        return out
    ids = plan.ids()
    payload = {"expire_page_ids": ids["expired"], "evict_page_ids": ids["evicted"], "purge_page_ids": ids["purged"],
               "prune_observations_before": plan.prune_before, "prune_session_ids": plan.prune_sessions,
               "prune_batch": decay.observation_prune_batch, "prune_ledgers": plan.ledgers}
    res = await ctx.send("sweep.apply", payload, scope)
    pruned = int(res.get("observations_pruned", 0))
    remaining = plan.prune_observations - pruned
    while plan.prune_sessions and remaining > 0 and res.get("observations_pruned"):
        res2 = await ctx.send("sweep.apply", {"prune_observations_before": plan.prune_before,
                                              "prune_session_ids": plan.prune_sessions,
                                              "prune_batch": decay.observation_prune_batch}, scope)
        n = int(res2.get("observations_pruned", 0))
        if n == 0:
            break
        pruned += n
        remaining -= n
    res["observations_pruned"] = pruned
    for action in ("expired", "evicted", "purged"):
        ctx.metrics.sweep_pages.labels(action).inc(len(res.get(action, [])))
    ctx.metrics.sweep_pages.labels("observations_pruned").inc(pruned)
    out["applied"] = res
    return out
