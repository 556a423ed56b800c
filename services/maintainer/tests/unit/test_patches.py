"""Auto-improve patches: applying edits, the review's limits, and the executable eval gate
(real child processes: a Python script per answer)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from aimem_maintainer import patches
from aimem_maintainer.auto_improve import Review, validate_proposals
from aimem_common.read.proposals import recent_rejections
from aimem_common.read.scopes import all_scopes

BASE = "# Tests\n\nRun `make test`.\n\n## Speed\n\nUse -x to stop early.\n"


def test_apply_patch_replaces_each_find_once():
    out = patches.apply_patch(BASE, [{"find": "`make test`", "replace": "`make test` before every commit"},
                                     {"find": "-x", "replace": "`-x`"}])
    assert out == "# Tests\n\nRun `make test` before every commit.\n\n## Speed\n\nUse `-x` to stop early.\n"


@pytest.mark.parametrize(("base", "edits", "why"), [
    (BASE, [], "no edits"),
    (BASE, [{"find": "", "replace": "all new"}], "empty find on an existing page"),
    (BASE, [{"find": "not there", "replace": "x"}], "occurs 0 times"),
    (BASE, [{"find": "t", "replace": "T"}], "occurs 5 times"),
    (BASE, [{"find": "Tests", "replace": "Tests"}], "changes nothing"),
    (None, [{"find": "x", "replace": "body"}], "a new page is one edit"),
    (None, [{"find": "", "replace": "  "}], "needs a body"),
])
def test_apply_patch_refuses_what_does_not_apply(base, edits, why):
    with pytest.raises(patches.PatchError, match=why):
        patches.apply_patch(base, edits)


def test_new_page_is_one_edit_with_empty_find():
    assert patches.apply_patch(None, [{"find": "", "replace": "# New\n"}]) == "# New\n"


def test_budget_bounds_pages_edits_and_changed_chars():
    cfg = SimpleNamespace(max_proposals_per_run=2, max_edits_per_proposal=3, max_changed_chars=40)
    b = patches.Budget(cfg)
    assert b.take([{"find": "a" * 10, "replace": "b" * 10}, {"find": "c", "replace": "d"}]) is None  # 22 chars
    assert "changed characters" in b.take([{"find": "x" * 10, "replace": "y" * 10}])  # 20 > 18 left
    assert "edits over the 1 left" in b.take([{"find": "x", "replace": "y"}] * 2)
    assert b.take([{"find": "x", "replace": "y"}]) is None
    assert "pages per proposal" in b.take([{"find": "x", "replace": "y"}])


def _script(tmp_path: Path, name: str, code: str) -> list[str]:
    p = tmp_path / f"{name}.py"
    p.write_text("import json, sys, time\nproposal = json.load(sys.stdin)\n" + code)
    return [sys.executable, str(p)]


def _eval_cfg(command, timeout_s=10.0):
    return SimpleNamespace(enabled=True, command=command, prefixes=["_rules/", "procedures/"], timeout_s=timeout_s)


PROPOSAL = {"path": "_rules/quote.md", "before": "old", "after": "new", "patch": [{"find": "old", "replace": "new"}]}


@pytest.mark.asyncio
async def test_eval_accepts_when_the_score_does_not_get_worse(tmp_path):
    cmd = _script(tmp_path, "ok", "print(json.dumps({'decision': 'accept', 'score_before': 0.8,"
                                  " 'score_after': 0.8 if proposal['after'] == 'new' else 0}))")
    got = await patches.run_eval(_eval_cfg(cmd), PROPOSAL)
    assert got == {"decision": "accept", "reason": "accepted by eval", "score_before": 0.8, "score_after": 0.8,
                   "accept": True}


@pytest.mark.parametrize(("code", "reason"), [
    ("print(json.dumps({'decision': 'reject', 'reason': 'breaks rule 3'}))", "breaks rule 3"),
    ("print(json.dumps({'decision': 'accept', 'score_before': 0.9, 'score_after': 0.7}))",
     "eval got worse: 0.9 → 0.7"),
    ("sys.stderr.write('boom'); sys.exit(3)", "eval exited 3: boom"),
    ("print('not json')", "eval answered no valid JSON"),
    ("print(json.dumps({'decision': 'maybe'}))", "decision must be accept or reject"),
    ("time.sleep(30)", "eval timed out after 1 s"),
])
@pytest.mark.asyncio
async def test_eval_rejects(tmp_path, code, reason):
    got = await patches.run_eval(_eval_cfg(_script(tmp_path, "e", code), timeout_s=1.0), PROPOSAL)
    assert got["accept"] is False and reason in got["reason"]


@pytest.mark.asyncio
async def test_eval_that_cannot_start_rejects(tmp_path):
    got = await patches.run_eval(_eval_cfg([str(tmp_path / "missing")]), PROPOSAL)
    assert got["accept"] is False and got["reason"].startswith("eval could not start")


def test_gated_only_for_chosen_prefixes():
    cfg = _eval_cfg(["x"])
    assert patches.gated(cfg, "_rules/a.md") and patches.gated(cfg, "procedures/b.md")
    assert not patches.gated(cfg, "concepts/c.md")
    assert not patches.gated(SimpleNamespace(enabled=False, prefixes=["_rules/"]), "_rules/a.md")


AI_CFG = SimpleNamespace(min_confidence=0.75, max_proposals_per_run=5, max_edits_per_proposal=3,
                         max_changed_chars=200, max_final_body_chars=32_000)


def test_validate_turns_model_patches_into_bounded_proposals(seed):
    a = seed.project("alpha")
    pid = seed.page(a, "procedures/run-tests.md", BASE, title="Run the tests")
    scope = all_scopes(seed.conn)[0]
    review = Review.model_validate({"proposals": [
        {"path": "procedures/run-tests.md", "title": "Run the tests", "rationale": "r", "confidence": 0.9,
         "edits": [{"find": "`make test`", "replace": "`make test -j2`"}]},
        {"path": "gotchas/new.md", "title": "New", "rationale": "r", "confidence": 0.9,
         "edits": [{"find": "", "replace": "A new gotcha."}]},
        {"path": "procedures/run-tests.md", "title": "Rewrite", "rationale": "r", "confidence": 0.9,
         "edits": [{"find": "", "replace": "everything new"}]},
        {"path": "concepts/big.md", "title": "Big", "rationale": "r", "confidence": 0.9,
         "edits": [{"find": "", "replace": "y" * 300}]},
        {"path": "sessions/nope.md", "title": "x", "rationale": "r", "confidence": 0.99,
         "edits": [{"find": "", "replace": "x"}]},
        {"path": "concepts/low.md", "title": "x", "rationale": "r", "confidence": 0.3,
         "edits": [{"find": "", "replace": "x"}]},
        {"path": "concepts/many.md", "title": "x", "rationale": "r", "confidence": 0.9,
         "edits": [{"find": "", "replace": "x"}, {"find": "x", "replace": "y"}]},
    ]})
    accepted, rejected = validate_proposals(seed.conn, scope, review, AI_CFG)
    assert [(p["path"], p["target_page_id"]) for p in accepted] == [("procedures/run-tests.md", pid),
                                                                    ("gotchas/new.md", None)]
    assert accepted[0]["body"] == BASE.replace("`make test`", "`make test -j2`")
    assert accepted[0]["patch"] == [{"find": "`make test`", "replace": "`make test -j2`"}]
    reasons = {r["path"]: r["reason"] for r in rejected}
    assert reasons["procedures/run-tests.md"].startswith("patch does not apply: edit 1: empty find")
    assert reasons["concepts/big.md"].startswith("300 changed characters over the")
    assert reasons["sessions/nope.md"].startswith("invalid:")
    assert reasons["concepts/low.md"] == "confidence 0.30 < 0.75"
    assert reasons["concepts/many.md"].startswith("patch does not apply: a new page is one edit")
    assert all(r["stage"] == "validation" for r in rejected)


def test_recent_rejections_feed_back_newest_first_with_bounded_text(seed):
    a = seed.project("alpha")
    for i, (stage, reason) in enumerate([("validation", "too long"), ("eval", "eval got worse: 1 → 0"),
                                         (None, "operator said no")]):
        seed.conn.execute(
            "INSERT INTO auto_improve_proposals(workspace_id, project_id, path, body, status, created_at, patch,"
            " reject_stage, reject_reason) VALUES (?,?,?,?,'rejected',?,?,?,?)",
            (a.workspace_id, a.project_id, f"_rules/r{i}.md", "", seed.tick(),
             '[{"find": "a", "replace": "' + "z" * 500 + '"}]', stage, reason))
    got = recent_rejections(seed.conn, a.project_id, 2)
    assert [(g["path"], g["stage"], g["reason"]) for g in got] == [
        ("_rules/r2.md", "operator", "operator said no"), ("_rules/r1.md", "eval", "eval got worse: 1 → 0")]
    assert got[0]["edits"] == [{"find": "a", "replace": "z" * 300}]
    assert recent_rejections(seed.conn, a.project_id, 0) == []
