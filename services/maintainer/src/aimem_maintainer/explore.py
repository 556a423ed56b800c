"""``explore``: an LLM prose digest of the project's structured briefing snapshot.

The snapshot is the shared ``aimem_common.read.briefing.briefing`` (the one ``memory_briefing``
returns), so the digest and the MCP tool describe the same state.

Without a provider it answers the structured snapshot itself (``mode: "structured"``), the
degraded result the MCP tool falls back to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from aimem_common.read.briefing import briefing
from aimem_common.models import Scope

from aimem_maintainer.llm import fence

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext


SNAPSHOT_RECENT = 12  # recent pages in the snapshot the LLM summarises


class Digest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digest: str
    highlights: list[str]


async def explore(ctx: "MaintContext", scope: Scope, focus: str | None = None) -> dict[str, Any]:
    snap = await ctx.read_pool.run(briefing, scope, recent_limit=SNAPSHOT_RECENT)
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
