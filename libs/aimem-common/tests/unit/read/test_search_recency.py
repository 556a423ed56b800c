"""Questions that ask for the newest of something ("the latest deployment target") let page
time count in the fusion (the recency stream); every other question keeps its text order."""

from __future__ import annotations

import pytest

from aimem_common.search.query import memory_query
from aimem_common.search.question import QueryOptions, Question, recency_cue

DAY_S = 86_400


def _q(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw)).to_json()


def _ids(res) -> list[int]:
    return [h["page_id"] for h in res["hits"]]


@pytest.mark.parametrize(("text", "cue"), [
    ("what is the latest deployment target", "latest"),
    ("Which is the NEWEST runner image?", "newest"),
    ("the most   recent outage", "most recent"),
    ("when was the last time we rotated keys", "last time"),
    ("which database do we currently use", "currently"),
    ("what is the current cache TTL", None),  # a state, not the newest (see RECENCY_CUES)
    ("where do we deploy right now", "right now"),
    ("where do we deploy now?", "now"),
    ("what did we change recently", None),  # a period, not the newest
    ("do you know the snowy deployment", None),  # "now" inside words
    ("the last deployment failed", None),
    ("", None),
])
def test_the_recency_cue_is_found_once_when_the_question_is_shaped(text, cue):
    assert recency_cue(text) == cue
    assert Question.of(text).recency == cue


def _two_deploy_pages(seeder, app) -> tuple[int, int]:
    older = seeder.page(app, "notes/deploy-blue.md", "# Deployment target\nThe deployment target is the blue"
                        " cluster: every deployment goes to the blue cluster, the deployment target of the API.",
                        age_days=40)
    newer = seeder.page(app, "notes/deploy-green.md", "# Cluster move\nWe moved the deployment target to the"
                        " green cluster.", age_days=2)
    return older, newer


def test_latest_ranks_the_newer_page_first_and_a_plain_question_keeps_text_order(pool, seeder):
    app = seeder.scope("default", "app")
    older, newer = _two_deploy_pages(seeder, app)
    lunch = seeder.page(app, "notes/lunch.md", "# Lunch\nPizza on Friday.", age_days=0)  # newest, unrelated

    plain = _q(pool, "what is the deployment target", [app])
    assert _ids(plain) == [older, newer]
    assert "recency" not in plain and "recency" not in plain["streams_active"]
    assert all("recency" not in h["score_details"]["streams"] for h in plain["hits"])
    assert "recency" not in plain["stream_ms"]

    latest = _q(pool, "what is the latest deployment target", [app])
    assert _ids(latest) == [newer, older]  # the unrelated newest page is not brought in
    assert lunch not in _ids(latest)
    assert latest["recency"] == "latest" and "recency" in latest["streams_active"]
    first, second = (h["score_details"]["streams"]["recency"] for h in latest["hits"])
    assert (first["rank"], second["rank"]) == (1, 2)
    assert first["score"] == 38 * DAY_S and second["score"] == 0  # seconds newer than the oldest
    assert first["rrf"] > second["rrf"]
    # The text streams alone still rank the older page first: the recency share is what moved it.
    text_only = {h["page_id"]: h["score_details"]["rrf"] - h["score_details"]["streams"]["recency"]["rrf"]
                 for h in latest["hits"]}
    assert text_only[older] > text_only[newer]


def test_now_and_currently_ask_for_the_newest_too(pool, seeder):
    app = seeder.scope("default", "app")
    older, newer = _two_deploy_pages(seeder, app)
    for q in ("which deployment target do we use now", "what is currently the deployment target"):
        assert _ids(_q(pool, q, [app]))[:2] == [newer, older], q


def test_a_clearly_better_match_keeps_its_place(pool, seeder):
    app = seeder.scope("default", "app")
    best = seeder.page(app, "notes/vault-rotation.md", "# Vault key rotation\nThe vault key rotation runs"
                       " monthly; vault rotation of the signing key is done by the rotation job.", age_days=90)
    newer = seeder.page(app, "notes/misc.md", "# Misc\nThe vault was mentioned in standup.", age_days=1)
    res = _q(pool, "when was the last time the vault key rotation ran", [app])
    assert res["recency"] == "last time"
    assert _ids(res)[:2] == [best, newer]
    assert res["hits"][1]["score_details"]["streams"]["recency"]["rank"] == 1
