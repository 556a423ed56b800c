"""``explore``: an LLM prose digest of the project's structured briefing snapshot.

Without a provider it answers the structured snapshot itself (``mode: "structured"``), the
degraded result the MCP tool falls back to.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from aimem_maintainer.llm import fence
from aimem_maintainer.store import ScopeIds

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext


def briefing(conn: sqlite3.Connection, scope: ScopeIds, limit: int = 12) -> dict[str, Any]:
    """Counts, recent pages, rules, slots and recent sessions of ``scope`` (bounded)."""
    pid = scope.project_id
    counts = {r["kind"]: r["n"] for r in conn.execute(
        "SELECT kind, count(*) AS n FROM pages WHERE project_id = ? AND is_latest = 1 GROUP BY kind", (pid,))}

    def pages(where: str) -> list[dict[str, Any]]:
        return [dict(r) for r in conn.execute(
            f"SELECT path, title, substr(body, 1, 600) AS excerpt, updated_at FROM pages WHERE project_id = ?"
            f" AND is_latest = 1 AND {where} ORDER BY updated_at DESC LIMIT ?", (pid, limit))]

    sessions = [dict(r) for r in conn.execute(
        "SELECT session_id, agent, started_at, ended_at, observation_count FROM sessions WHERE project_id = ?"
        " ORDER BY last_event_at DESC LIMIT ?", (pid, limit))]
    return {"workspace": scope.workspace, "project": scope.project, "counts": counts,
            "rules": pages("path LIKE '\\_rules/%' ESCAPE '\\'"), "slots": pages("path LIKE '\\_slots/%' ESCAPE '\\'"),
            "recent": pages("path NOT LIKE '\\_%' ESCAPE '\\'"), "sessions": sessions}


class Digest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digest: str
    highlights: list[str]


async def explore(ctx: "MaintContext", scope: ScopeIds, focus: str | None = None) -> dict[str, Any]:
    snap = await ctx.store.run(lambda conn: briefing(conn, scope))
    if ctx.llm is None:
        return {"mode": "structured", "briefing": snap, "llm": "not_configured"}
    async with ctx.job("explore"):
        out = await ctx.llm.structured(
            Digest, name="explore_digest",
            system="Summarise the state of this software project's memory for an agent starting work: what "
                   "is going on, the standing rules and decisions, and what was done recently. Be concise.",
            user=("Focus: " + fence("focus", focus) + "\n\n" if focus else "") + "Briefing:\n" + fence("briefing", snap),
        )
    return {"mode": "prose", "digest": out.digest, "highlights": out.highlights, "briefing": snap}
