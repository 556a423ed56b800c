"""Consolidation's slot regimes and page count: a state slot may be rewritten, an invariant
one never; ``multi_page`` false keeps one page. Pure validation plus the seeded store read."""

from __future__ import annotations

import pytest

from aimem_common.errors import LlmOutputError
from aimem_common.read.scopes import all_scopes
from aimem_maintainer.consolidate import ConsolidationOutput, build_prompt, gather, slot_regime, to_page_writes

SLOTS = [{"path": "_slots/focus.md", "regime": "state"}, {"path": "_slots/identity.md", "regime": "invariant"}]


def _out(*paths: str) -> ConsolidationOutput:
    return ConsolidationOutput.model_validate({"language": "en", "pages": [
        {"path": p, "title": p, "body": f"text of {p}", "entities": []} for p in paths]})


def test_state_slot_is_rewritten_invariant_slot_never():
    writes = to_page_writes(_out("_slots/focus.md", "_slots/identity.md", "_slots/new.md", "concepts/a.md"),
                            "s1", "sessions/s1.md", slots=SLOTS)
    assert [w["path"] for w in writes] == ["_slots/focus.md", "_slots/new.md", "concepts/a.md"]
    assert writes[0]["frontmatter"]["slot_kind"] == "state" and writes[1]["frontmatter"]["slot_kind"] == "state"
    assert "Source: [[sessions/s1.md]]" in writes[2]["body"] and "Source:" not in writes[0]["body"]


def test_only_an_invariant_slot_is_nothing_to_write():
    with pytest.raises(LlmOutputError, match="invariant slots"):
        to_page_writes(_out("_slots/identity.md"), "s1", None, slots=SLOTS)


def test_single_page_keeps_the_first():
    assert [w["path"] for w in to_page_writes(_out("concepts/a.md", "gotchas/b.md"), "s1", None, max_pages=1)] == [
        "concepts/a.md"]


def test_slot_regime_defaults_to_state():
    assert slot_regime('{"slot_kind": "invariant"}') == "invariant"
    assert slot_regime('{"slot_kind": "state"}') == slot_regime("{}") == slot_regime("not json") == "state"


def test_the_prompt_shows_slots_with_their_regime(seed):
    a = seed.project("alpha")
    seed.page(a, "_slots/focus.md", "Fixing the cache", title="Focus", frontmatter={"slot_kind": "state"})
    seed.page(a, "_slots/identity.md", "We are the payments team", title="Identity",
              frontmatter={"slot_kind": "invariant"})
    seed.page(a, "sessions/s1.md", "# s1\ncache work", session_id="s1")
    material = gather(seed.conn, all_scopes(seed.conn)[0], "s1", budget_chars=10_000, related_k=2)
    assert [(s["path"], s["regime"]) for s in material["slots"]] == [("_slots/focus.md", "state"),
                                                                     ("_slots/identity.md", "invariant")]
    prompt = build_prompt(material, "s1")
    assert '<untrusted-data label="slots">' in prompt and '"regime": "invariant"' in prompt
