"""``reranker = "llm"``: the maintainer's side of the ``rerank`` RPC (``aimem_common.rerank``).

One structured call ranks at most 30 short candidates (each fenced as untrusted data); the
answer is a ranking of indices, turned into scores (first = highest; an index the model left
out scores 0 and keeps its local place). At most ``LLM_MAX_IN_FLIGHT`` rerank calls run at
once in this maintainer; one more is refused at once (the caller keeps its order).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from aimem_common.errors import BadRequestError, UnavailableError
from aimem_common.rerank import LLM_DOC_CHARS, LLM_MAX_CANDIDATES

from aimem_maintainer.llm import fence

if TYPE_CHECKING:
    from aimem_maintainer.context import MaintContext

SYSTEM = (
    "You rank search results for a developer's question about their codebase memory. Return "
    "the indices of the documents, most relevant first. Leave out documents that do not help."
)


class RerankOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ranking: list[int] = Field(description="document indices, most relevant first")


async def rank(ctx: "MaintContext", query: str, documents: list[str], budget_s: float = 10.0) -> dict[str, Any]:
    """Return ``{"scores": [float per document]}``. The LLM call is cancelled past ``budget_s``
    (the caller has stopped waiting by then), so an abandoned call never holds a slot.

    Raises:
        BadRequestError: more than 30 documents or no query.
        UnavailableError: ``rerank_busy`` (every slot taken), ``rerank_timeout``.
        LlmNotConfiguredError / LlmUnavailableError / LlmOutputError: as any LLM job.
    """
    llm = ctx.require_llm("rerank")
    if not query.strip() or not documents or len(documents) > LLM_MAX_CANDIDATES:
        raise BadRequestError(f"rerank needs a query and 1..{LLM_MAX_CANDIDATES} documents")
    if ctx.rerank_slots.locked():
        raise UnavailableError("every rerank slot is busy", code="rerank_busy")
    docs = [{"index": i, "text": str(d)[:LLM_DOC_CHARS]} for i, d in enumerate(documents)]
    user = f"Question:\n{fence('query', query[:1000])}\n\nDocuments:\n{fence('documents', docs)}"
    async with ctx.rerank_slots:
        try:
            out = await asyncio.wait_for(
                llm.structured(RerankOutput, name="rerank", system=SYSTEM, user=user, max_tokens=512),
                max(0.1, min(budget_s, 30.0)))
        except TimeoutError:
            raise UnavailableError("rerank took longer than its budget", code="rerank_timeout") from None
    n = len(documents)
    scores = [0.0] * n
    seen: set[int] = set()
    for pos, i in enumerate(out.ranking):
        if 0 <= i < n and i not in seen:
            seen.add(i)
            scores[i] = float(n - pos)
    return {"scores": scores}
