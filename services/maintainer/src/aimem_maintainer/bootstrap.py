"""``bootstrap``: the configured LLM's reading of a rule-based repository overview.

``aimem bootstrap`` builds the overview locally (README, manifests, git log; see
``aimem_cli.bootstrap``) and asks this job for a richer introduction: what the project is,
how it is put together, how to work in it. The overview is repository text, so it is
fenced as untrusted data; the answer is JSON-schema structured output. Without a provider
the job answers ``{"mode": "rule-based"}`` and the CLI writes the rule-based page alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from aimem_common.errors import BadRequestError
from aimem_maintainer.llm import fence

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

MAX_OVERVIEW_CHARS = 16 * 1024


class Introduction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str
    architecture: str
    how_to_work: list[str]


async def introduce(ctx: "MaintContext", overview: Any) -> dict[str, Any]:
    """Return ``{"mode": "llm", "summary", "architecture", "how_to_work"}`` or ``{"mode": "rule-based"}``.

    Raises:
        BadRequestError: ``overview`` is not a string of ≤ ``MAX_OVERVIEW_CHARS`` characters.
    """
    if not isinstance(overview, str) or not overview.strip() or len(overview) > MAX_OVERVIEW_CHARS:
        raise BadRequestError(f"overview must be a string of 1-{MAX_OVERVIEW_CHARS} characters")
    if ctx.llm is None:
        return {"mode": "rule-based", "llm": "not_configured"}
    async with ctx.job("bootstrap"):
        out = await ctx.llm.structured(
            Introduction, name="bootstrap_introduction",
            system="You introduce a software repository to a coding agent that has never seen it. From the "
                   "overview (facts gathered from its README, manifests and git history), write: a short "
                   "summary of what it is; how it is put together (components and how they talk); and a few "
                   "concrete how-to-work points (commands to run, where changes go). Use only the overview.",
            user="Overview:\n" + fence("overview", overview),
        )
    return {"mode": "llm", "summary": out.summary, "architecture": out.architecture,
            "how_to_work": out.how_to_work}
