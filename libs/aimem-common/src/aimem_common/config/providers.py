"""Sections of the model providers: ``[llm]``, ``[[llm_fallbacks]]``, ``[embedding]``, ``[rerank]``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


# ``[llm] reasoning_effort``, mapped per provider by the maintainer's llm module: OpenAI's
# ``reasoning_effort``, Anthropic's ``thinking`` budget, Gemini's ``thinking_config`` budget.
ReasoningEffort = Literal["minimal", "low", "medium", "high"]


class LlmCandidate(BaseModel):
    """One LLM provider profile (primary or a ``[[llm_fallbacks]]`` entry)."""

    provider: Literal["openai", "openai-compat", "anthropic", "gemini"]
    model: str
    base_url: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key, never the key
    reasoning_effort: ReasoningEffort | None = None


class LlmSettings(BaseModel):
    """Chat provider for consolidation/auto-improve/explore (zero-LLM when provider is None).

    ``provider``: ``openai`` / ``openai-compat`` (the ``openai`` SDK), ``anthropic`` (Messages
    API, ``anthropic`` SDK) or ``gemini`` (Gemini API, ``google-genai`` SDK)."""

    provider: Literal["openai", "openai-compat", "anthropic", "gemini"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 300.0
    reasoning_effort: ReasoningEffort | None = None
    headers: dict[str, str] = {}
    # False: no response_format=json_schema (endpoints that refuse it); the schema then
    # rides in the system prompt and the answer is still validated against it.
    compat_strict: bool = True
    circuit_cooldown_s: float = 30.0  # a candidate that failed transiently is skipped this long


class EmbeddingSettings(BaseModel):
    """Vector provider; None keeps retrieval FTS/entity/link only."""

    provider: Literal["openai", "openai-compat", "local"] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    dim: int | None = None
    batch_size: int = 64
    # Read side (query, mcp-gateway): embedding the question is bounded; past the timeout or
    # on an error the search runs without the vector stream, and the embedder is left alone
    # for the cooldown so a down provider does not add its timeout to every search.
    query_timeout_ms: int = 2000
    query_cooldown_s: float = 10.0


class RerankSettings(BaseModel):
    """Optional cross-encoder rerank of a search's top hits (``aimem_common.rerank``); off when
    ``provider`` is None. ``http``: a ``POST <base_url>/rerank`` endpoint (Cohere's shape, also
    vLLM's, Jina's, Infinity's); ``llm``: the maintainer's ``[llm]`` chain ranks them (one
    bounded call per query, ``aimem_common.rerank.LlmReranker``). ``top_n`` hits are reordered
    by its score; past ``timeout_ms`` or on an error the fused order stays, and the reranker
    rests ``cooldown_s``."""

    provider: Literal["http", "llm"] | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    top_n: int = Field(20, ge=2, le=100)  # "llm": at most 30 (LLM_MAX_CANDIDATES)
    timeout_ms: int = 1500
    cooldown_s: float = 10.0
