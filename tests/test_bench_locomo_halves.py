"""``bench.locomo.score_halves``: hit@5 and MRR of conversations 0–2 (tuned) and 3–4 (check)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import Conversation, Loaded, Question, score_halves  # noqa: E402


def test_each_half_is_scored_on_its_own_conversations():
    convs = [Conversation(f"c{i}", f"locomo-c{i}", {1: ("d", []), 2: ("d", [])}) for i in range(5)]
    qs = [Question(f"c{i}", 1, f"q{i}", {1}) for i in range(5)]
    # conversations 0–2: found first, second, never; 3–4: found first both times
    rankings = [[1, 2], [2, 1], [2], [1], [1, 2]]
    tuned, check = score_halves(Loaded(convs, qs), rankings)
    assert (tuned["half"], tuned["n"], tuned["indices"]) == ("tuned 0-2", 3, [0, 1, 2])
    assert tuned["hit@1"] == 1 / 3 and tuned["hit@5"] == 2 / 3 and tuned["mrr"] == (1 + 0.5) / 3
    assert (check["half"], check["n"], check["hit@1"], check["mrr"]) == ("check 3-4", 2, 1.0, 1.0)
