"""What one ``memory_query`` call asks: ``Question``, ``QueryOptions``, ``QueryVector``.

The ``Question`` is the question's words shaped once for every stream.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aimem_common.read.text import fts_query, identifier_terms, latin_terms, query_terms, trigrams, unspaced_runs


@dataclass(slots=True)
class QueryOptions:
    """Knobs of one ``memory_query`` call (units in names; defaults = DESIGN.md).

    ``limit``: hits returned (1–100). ``rrf_k``: RRF constant. ``snippet_words``: snippet
    length in words. ``raw_limit``: max ``raw_hits``. ``candidates``: per-stream depth.
    ``rerank_docs``: > 0 adds ``result["rerank"]`` for that many top hits (the reranker's input).
    """

    limit: int = 10
    explain: bool = False
    include_expired: bool = False
    include_superseded: bool = False
    raw_fallback: bool = True
    rrf_k: int = 60
    snippet_words: int = 24
    raw_limit: int = 10
    candidates: int = 60
    rerank_docs: int = 0


@dataclass(frozen=True, slots=True)
class QueryVector:
    """A query embedding plus the identity it was made with (invariant 8).

    ``vector``: ``dim`` floats. Only ``page_embeddings`` rows with the same
    ``provider``/``model``/``dim`` are compared.
    """

    vector: Sequence[float]
    provider: str
    model: str
    dim: int


@dataclass(frozen=True, slots=True)
class TrigramTerms:
    """What the trigram streams search for one question (``trigram_terms``).

    ``match``: the ``pages_tri`` MATCH expression (``None`` = nothing to match): the trigrams of
    the unspaced runs of ≥ 3 characters, OR'ed, and the Latin/digit terms (``text.latin_terms``)
    as phrases, i.e. substrings. ``short``: the 1–2 character unspaced words, matched by the
    trigrams starting with them. ``latin_only``: the question has no unspaced word: the stream
    then only adds pages the fts stream did not find (a Latin word glued to CJK text), so a CJK
    page does not count its spaced Latin words twice.
    """

    match: str | None
    short: list[str]
    latin_only: bool


def trigram_terms(query: str) -> TrigramTerms:
    """Return the trigram stream's ``TrigramTerms`` for ``query`` (pure: reads no index).

    ``缓存策略`` → match ``"缓存策" OR "存策略"``; ``缓存`` → short ``["缓存"]``;
    ``我们使用Redis缓存`` → match ``"我们使" OR … OR "redis"``; ``lower database load`` →
    match ``"lower" OR "database" OR "load"`` (latin_only). An English-only vault has no
    page in ``pages_tri``, so an English question's match costs one empty lookup per term.
    """
    runs = unspaced_runs(query)
    grams, short = trigrams(runs)
    latin = latin_terms(query)
    return TrigramTerms(fts_query(list(dict.fromkeys(grams + latin))), list(dict.fromkeys(short)), not runs)


# Words by which a question asks for the newest of something ("the latest deployment", "what
# do we use now"); the recency stream orders the fused top by page time for those questions
# only. Tuned on LoCoMo dev conversations 0–2 (bench/locomo.py; 3–4 kept as the check): the
# adjective "current" ("my current team") and "recent(ly)" ("what did we change recently")
# describe a state or a period rather than ask for the newest, and were the only cues that
# moved an evidence session down (MRR 0.8354 → 0.8337 with "current", → 0.8329 with
# "recent(ly)"); "most recent" and "currently" stay in.
RECENCY_CUES = re.compile(
    r"\b(latest|newest|most\s+recent(?:ly)?|last\s+time|currently|(?:right\s+)?now)\b", re.IGNORECASE)


def recency_cue(text: str) -> str | None:
    """The first words of ``text`` asking for the newest of something (``RECENCY_CUES``),
    lowercased with single spaces (``"What is the LATEST  build"`` → ``"latest"``), or None."""
    m = RECENCY_CUES.search(text)
    return " ".join(m.group(1).lower().split()) if m else None


@dataclass(frozen=True, slots=True)
class Question:
    """The question's text shaped once for every stream (pure: reads no index).

    ``terms``: content terms (``text.query_terms``, stopwords dropped); ``fts``: their quoted OR
    (``None`` when there is none); ``idents``: identifier-like words (``text.identifier_terms``);
    ``tri``: the unspaced-script words and Latin substrings (``trigram_terms``); ``recency``:
    the words asking for the newest of something (``recency_cue``; None for most questions).
    """

    text: str
    terms: list[str]
    fts: str | None
    idents: list[str]
    tri: TrigramTerms
    recency: str | None = None

    @classmethod
    def of(cls, text: str) -> "Question":
        """Shape ``text`` (any string; FTS5 operators in it stay inert)."""
        terms = query_terms(text)
        return cls(text, terms, fts_query(terms), identifier_terms(text), trigram_terms(text), recency_cue(text))
