"""The passage stage: the top fused pages are scored again by their best run of a few turns
(session pages, from the captured turns) or body lines, so a page that answers in neighbouring
turns or lines beats one that names the question's words here and there."""

from __future__ import annotations

from aimem_common.search.fusion import Cand
from aimem_common.search.query import memory_query
from aimem_common.search.question import QueryOptions, Question
from aimem_common.search.stream import Run
from aimem_common.search.streams import passage

Q = "ledger postgres partitions"


def _q(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw)).to_json()


def _session(seeder, scope, sid: str, turns: dict[int, str], n: int = 30) -> int:
    page = seeder.page(scope, f"sessions/{sid}.md", f"# Session {sid}\nA digest of small talk.", session_id=sid)
    for i in range(n):
        seeder.observation(scope, sid, "user-prompt", turns.get(i, f"turn {i}: small talk about the weather"))
    return page


def test_a_session_answering_in_neighbouring_turns_ranks_first(pool, seeder, monkeypatch):
    app = seeder.scope("default", "app")
    # The same best single turn in both sessions; only s-near says the rest next to it.
    spread = _session(seeder, app, "s-far", {6: "the ledger moved to postgres", 25: "partitions of the old disk"})
    near = _session(seeder, app, "s-near", {6: "the ledger moved to postgres", 7: "with monthly partitions"})
    res = _q(pool, Q, [app])
    assert [h["page_id"] for h in res["hits"][:2]] == [near, spread]
    streams = res["hits"][0]["score_details"]["streams"]
    assert streams["passage"]["rank"] == 1 and "passage" in res["stream_ms"]
    assert res["hits"][1]["score_details"]["streams"]["passage"]["rank"] == 2
    # Without the stage the two tie on every stream and page id order decides.
    monkeypatch.setattr(passage, "PASSAGE_PAGES", 0)
    res = _q(pool, Q, [app])
    assert [h["page_id"] for h in res["hits"][:2]] == [spread, near] and "passage" not in res["streams_active"]


def test_a_page_answering_in_neighbouring_lines_ranks_first(pool, seeder):
    app = seeder.scope("default", "app")
    filler = "\n".join(f"- item {i} of the checklist" for i in range(20))
    spread = seeder.page(app, "notes/spread.md", f"# Storage\n- the ledger on postgres\n{filler}\n- partitions")
    near = seeder.page(app, "notes/near.md", f"# Storage\n- the ledger on postgres\n- partitions\n{filler}")
    res = _q(pool, Q, [app])
    assert [h["page_id"] for h in res["hits"][:2]] == [near, spread]
    assert res["hits"][0]["score_details"]["streams"]["passage"]["rank"] == 1


def test_passage_statistics_come_from_the_candidates_runs(pool, seeder):
    """A word in every run of the candidates (a name said in every session) weighs nothing:
    the session holding the rarer word wins though the other says the name more often."""
    app = seeder.scope("default", "app")
    name_only = _session(seeder, app, "s-name", {i: f"Priya says hello again, Priya {i}" for i in range(12)}, n=12)
    rare = _session(seeder, app, "s-rare", {**{i: f"Priya talks {i}" for i in range(12)}, 3: "Priya on terraform"}, n=12)
    with pool.connection() as conn:
        cands = {pid: Cand(pid, rrf=1.0) for pid in (name_only, rare)}
        turn_ids = {pid: [r[0] for r in conn.execute(
            "SELECT o.id FROM observations o JOIN pages p ON p.session_id = o.session_id WHERE p.id = ? ORDER BY o.id",
            (pid,))] for pid in (name_only, rare)}
        question = Question.of("priya terraform")
        assert question.terms == ["priya", "terraform"]
        ranked = passage.rank(Run(conn, question, [app], QueryOptions(), cands=cands, turn_ids=turn_ids))
    assert [pid for pid, _ in ranked] == [rare, name_only]
    assert ranked[0][1] > 0.5 and ranked[1][1] < 1e-4  # "priya" is in every run: idf floored at 1e-6


def test_kept_runs_and_words_answer_as_fresh_ones(pool, seeder):
    """The analysed runs and the snippet words kept from one search (by their text) give the
    next search the same answer as analysing and splitting again."""
    from aimem_common.read import text

    app = seeder.scope("default", "app")
    _session(seeder, app, "s-far", {6: "the ledger moved to postgres", 25: "partitions of the old disk"})
    _session(seeder, app, "s-near", {6: "the ledger moved to postgres", 7: "with monthly partitions"})
    passage._analysed.cache_clear()
    text._scan_kept.cache_clear()
    fresh = _q(pool, Q, [app])
    assert passage._analysed.cache_info().currsize > 0 and text._scan_kept.cache_info().currsize > 0
    again = _q(pool, Q, [app])
    assert passage._analysed.cache_info().hits > 0 and text._scan_kept.cache_info().hits > 0
    fresh.pop("stream_ms")
    again.pop("stream_ms")
    assert again == fresh
