"""The ``Stream`` protocol and the ordered stream registry (the shape of the writer's op registry).

A stream is a sync function ``rank(run) -> [(page_id, score)] | None`` registered with its
name and fusion weight::

    @stream("exact", weight=11.0, certain=True)
    def rank(run: Run) -> Ranked | None:
        if not run.question.idents:
            return None          # idle: not run, not timed
        return [...]             # best first; [] = ran and found nothing

Streams run in ``aimem_common.search.streams.ORDER`` (one module each there); a later stream
reads what earlier ones left on the ``Run`` (the fused candidates, the fts stream's pages, the
turns' matching observations). A duplicate name fails at import (``DuplicateStreamError``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aimem_common.models import Scope
from aimem_common.read.vectors import ChunkVectors
from aimem_common.search.fusion import Cand
from aimem_common.search.question import Question, QueryOptions, QueryVector

Ranked = list[tuple[int, float]]  # (page_id, score), best first


@dataclass(slots=True)
class Run:
    """One query on its way through the streams (a reader thread's; never shared).

    ``opts.candidates`` is the per-stream depth (``max(candidates, 3 × limit)``). The fields
    after ``cands`` are what a stream leaves for later ones and for the hits' explain.
    """

    conn: sqlite3.Connection
    question: Question
    scopes: list[Scope] | None
    opts: QueryOptions
    vector: QueryVector | None = None
    vectors: ChunkVectors | None = None
    cands: dict[int, Cand] = field(default_factory=dict)
    fts_ids: list[int] = field(default_factory=list)  # the fts stream's pages
    turn_ids: dict[int, list[int]] = field(default_factory=dict)  # session page -> matching observations, best first
    matched_entities: dict[int, list[str]] = field(default_factory=dict)  # explain: page -> entity names
    chunks: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # explain: page -> (chunk, cosine)
    via: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # explain: link neighbour -> its seeds
    bodies: dict[int, str] = field(default_factory=dict)  # live page bodies read so far (passage), for the snippets


class Ranker(Protocol):
    """A stream's ranking: ``[(page_id, score)]`` best first, or None when idle for this question."""

    def __call__(self, run: Run) -> Ranked | None: ...


@dataclass(frozen=True, slots=True)
class Stream:
    """A registered stream: its name, fusion weight and flags, and its ``Ranker``.

    ``margin``: a bm25 stream (adds the margin bonus, ``fusion.FTS_MARGIN_WEIGHT``).
    ``certain``: its share is added after authority (the exact stream). ``alone_weight``:
    the weight when no earlier stream found a page (the vector stream).
    """

    name: str
    weight: float
    rank: Ranker
    margin: bool = False
    certain: bool = False
    alone_weight: float | None = None


class DuplicateStreamError(ValueError):
    """Two streams claim the same name (raised at import time)."""


_STREAMS: dict[str, Stream] = {}


def stream(name: str, *, weight: float, margin: bool = False, certain: bool = False,
           alone_weight: float | None = None) -> Callable[[Ranker], Ranker]:
    """Register ``rank`` as the stream ``name`` with its fusion ``weight`` and flags (see ``Stream``).

    Raises:
        DuplicateStreamError: ``name`` is already registered.
    """

    def deco(rank: Ranker) -> Ranker:
        if name in _STREAMS:
            raise DuplicateStreamError(f"stream {name!r} already registered by {_STREAMS[name].rank.__module__}")
        _STREAMS[name] = Stream(name, weight, rank, margin, certain, alone_weight)
        return rank

    return deco


def registered() -> dict[str, Stream]:
    """A copy of every registered stream by name (``aimem_common.search.streams.STREAMS`` runs them in order)."""
    return dict(_STREAMS)
