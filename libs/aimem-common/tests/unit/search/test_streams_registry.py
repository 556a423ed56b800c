"""The stream registry: every stream module registered once, run in ``ORDER``, duplicates refused."""

from __future__ import annotations

import pytest

from aimem_common.search import stream as stream_mod
from aimem_common.search.streams import ORDER, STREAMS


def test_streams_run_in_the_documented_order_with_their_weights():
    assert [s.name for s in STREAMS] == list(ORDER) == [
        "fts", "turns", "exact", "trigram", "entity", "vector", "superseded", "links", "passage", "recency"]
    assert {s.name: s.weight for s in STREAMS} == {"fts": 1.0, "turns": 1.5, "exact": 11.0, "trigram": 1.0,
                                                  "entity": 0.8, "vector": 1.0, "superseded": 0.6, "links": 0.5,
                                                  "passage": 1.5, "recency": 1.0}
    assert {s.name for s in STREAMS if s.margin} == {"fts", "trigram", "turns", "passage", "recency"}
    assert [s.name for s in STREAMS if s.certain] == ["exact"]
    assert [(s.name, s.alone_weight) for s in STREAMS if s.alone_weight is not None] == [("vector", 1.0)]


def test_a_second_stream_of_the_same_name_is_refused():
    with pytest.raises(stream_mod.DuplicateStreamError, match="'fts' already registered"):
        stream_mod.stream("fts", weight=1.0)(lambda run: None)
    assert [s.name for s in stream_mod.registered().values()].count("fts") == 1
