"""The query shapes that keep ``memory_query`` cheap on a large vault return what the plain
shapes did: the fts stream ranks inside FTS5 and joins only its best rowids, the whole-vault
page count comes from FTS5's own row count, and the turns stream folds a session's matching
observations onto its live page."""

from __future__ import annotations

from aimem_common.search.question import QueryOptions
from aimem_common.search.sql import live_page_count
from aimem_common.search import hits
from aimem_common.search.fusion import Cand
from aimem_common.search.query import memory_query
from aimem_common.search.streams import entity


def _q(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw)).to_json()


def test_live_page_count_of_the_vault_matches_a_count(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    for i in range(300):  # > 127 rows: a two-byte varint
        seeder.page(app if i % 3 else infra, f"notes/n{i}.md", f"# Note {i}\nbody {i}")
    for i in range(0, 40, 2):
        seeder.page(app, f"notes/n{i + 1}.md", f"# Note {i + 1}\nnew body")  # supersedes app's, adds to infra's
    seeder.conn.execute("DELETE FROM pages WHERE path = 'notes/n299.md'")
    with pool.connection() as conn:
        live = conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
        assert 250 < live < 330
        assert live_page_count(conn, None) == live
        assert live_page_count(conn, [app]) == conn.execute(
            "SELECT count(*) FROM pages WHERE is_latest = 1 AND project_id = ?", (app.project_id,)).fetchone()[0]


def test_fts_stream_keeps_scope_and_expiry(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    keep = seeder.page(app, "notes/live.md", "# Broker failover\nThe broker failover drill.")
    seeder.page(app, "notes/old.md", "# Broker failover\nThe broker failover drill, expired.",
                expires_at="2020-01-01T00:00:00Z")
    other = seeder.page(infra, "notes/infra.md", "# Broker failover\nThe broker failover drill in infra.")
    for i in range(150):  # more matches than 2 x candidates
        seeder.page(app, f"notes/f{i}.md", f"# Note {i}\nfailover mentioned once.")
    res = _q(pool, "broker failover", [app])
    ids = [h["page_id"] for h in res["hits"]]
    assert ids[0] == keep and other not in ids and len(ids) == 10
    assert all(h["project"] == "app" and not h.get("expired") for h in res["hits"])
    assert _q(pool, "broker failover", [app], include_expired=True)["hits"][1]["path"] == "notes/old.md"
    assert {h["page_id"] for h in _q(pool, "broker failover", None)["hits"][:2]} == {keep, other}


def test_turns_stream_finds_a_session_page_by_any_turn(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    page = seeder.page(app, "sessions/s1.md", "# Session s1\nA digest that names only the first prompt.", session_id="s1")
    seeder.page(app, "notes/other.md", "# Other\nNothing about it.")
    for i in range(30):
        seeder.observation(app, "s1", "user-prompt", f"turn {i}: small talk")
    seeder.observation(app, "s1", "user-prompt", "we migrated the ledger to postgres partitions")
    seeder.observation(infra, "s1", "user-prompt", "ledger postgres partitions in infra")  # same id, other project
    seeder.end_session(app, "s1")  # ended: its turns lead to its page, none is a raw hit
    res = _q(pool, "ledger postgres partitions", [app])
    assert [h["page_id"] for h in res["hits"]] == [page] and res["raw_hits"] == []
    assert res["hits"][0]["score_details"]["streams"]["turns"]["rank"] == 1 and "turns" in res["stream_ms"]
    assert _q(pool, "ledger postgres partitions", [infra])["hits"] == []  # infra's s1 has no page
    assert [h["page_id"] for h in _q(pool, "ledger postgres partitions", None)["hits"]] == [page]
    # a retired version is not resurrected by its turns
    new = seeder.page(app, "sessions/s1.md", "# Session s1\nRewritten digest.", session_id="s1")
    assert [h["page_id"] for h in _q(pool, "ledger postgres partitions", [app])["hits"]] == [new]


def test_hits_read_only_the_candidates_that_can_win_and_match_reading_all(pool, seeder, monkeypatch):
    import random

    rng = random.Random(5)
    app = seeder.scope("default", "app")
    words = ["cache", "retry", "queue", "token", "index", "deploy", "schema", "worker"]
    kinds = ["decisions", "gotchas", "notes", "sessions", "concepts", "procedures"]
    for i in range(400):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(5, 40)))
        tags = rng.choice([[], ["deprecated"], ["canonical"], ["draft"]])
        seeder.page(app, f"{rng.choice(kinds)}/p{i}.md", f"# {rng.choice(words)} {i}\n{body}", tags=tags,
                    entities=rng.sample(words, 2), pinned=rng.random() < 0.1,
                    expires_at="2000-01-01T00:00:00Z" if rng.random() < 0.05 else None,
                    links=[f"notes/p{rng.randint(0, 399)}.md"])
    questions = ["cache retry", "queue token index", "deploy schema worker cache", "retry", "index worker"]
    reads: list[int] = []
    bounded = hits.candidate_rows

    def counting(conn, cands, limit, include_expired, in_scope=None):
        for q in bounded(conn, cands, limit, include_expired, in_scope):
            reads.append(q.cand.page_id)
            yield q

    def every(conn, cands, limit, include_expired, in_scope=None):
        ids = list(cands)
        meta = {r["id"]: r for r in conn.execute(hits._META_SQL.format(marks=",".join("?" * len(ids))), ids)}
        for pid, c in cands.items():
            q = hits.qualify(c, meta[pid], include_expired, in_scope) if pid in meta else None
            if q is not None:
                yield q

    for q in questions:
        for limit in (3, 10, 40):
            monkeypatch.setattr(hits, "candidate_rows", counting)
            reads.clear()
            got = _q(pool, q, [app], limit=limit)
            n_cands = sum(1 for _ in got["hits"])
            monkeypatch.setattr(hits, "candidate_rows", every)
            want = _q(pool, q, [app], limit=limit)
            assert [(h["page_id"], h["score"]) for h in got["hits"]] == [(h["page_id"], h["score"]) for h in want["hits"]]
            assert n_cands == min(limit, len(want["hits"]))
            if limit == 3:
                assert len(reads) < 60, (q, len(reads))  # not every candidate of every stream


def test_candidate_rows_keep_reading_while_authority_can_still_win(pool, seeder):
    app = seeder.scope("default", "app")
    weak = [seeder.page(app, f"sessions/s{i}.md", f"# s{i}\nword", tags=["deprecated"]) for i in range(30)]
    strong = [seeder.page(app, f"decisions/d{i}.md", f"# d{i}\nword", tags=["canonical"], pinned=True)
              for i in range(5)]
    # RRF puts every weak page ahead; authority (0.79 vs 1.22) makes the strong ones win.
    cands = {}
    for rank, pid in enumerate(weak + strong, start=1):
        cands[pid] = Cand(pid, rrf=1.0 / (60 + rank))
    with pool.connection() as conn:
        rows = list(hits.candidate_rows(conn, cands, 3, False))
        scored = sorted(((q.score, q.cand.page_id) for q in rows), reverse=True)
    assert {pid for _, pid in scored[:3]} <= set(strong)


def test_a_rare_entity_counts_its_live_pages_a_common_one_its_links(pool, seeder, monkeypatch):
    """Counting a common entity's live pages (a page lookup per link) was most of a global search
    at 1M pages: above ``DF_EXACT_MAX`` links its document frequency is its link count, and only
    when it is among the entities used."""
    monkeypatch.setattr(entity, "DF_EXACT_MAX", 20)
    monkeypatch.setattr(entity, "DF_LIVE_PROBE", 10)
    app = seeder.scope("default", "app")
    for i in range(30):
        seeder.page(app, f"notes/l{i}.md", f"# Ledger note {i}\nplain words", entities=["Ledger"])
    seeder.page(app, "notes/kafka.md", "# Kafka\nold text", entities=["Kafka", "Ledger"])
    seeder.page(app, "notes/kafka.md", "# Kafka\nnew text", entities=["Kafka", "Ledger"])  # supersedes the first
    seeder.page(app, "notes/kafka-2.md", "# Kafka again\ntext", entities=["Kafka"])
    with pool.connection() as conn:
        ids = {name: eid for eid, name in conn.execute("SELECT id, name FROM entities")}
        df = entity.entity_df(conn, list(ids.values()))
        assert df == {ids["kafka"]: 2, ids["ledger"]: 32}  # 2 live of 3 links; 32 links (31 live pages > the probe)
        monkeypatch.setattr(entity, "DF_LIVE_PROBE", 40)  # a common entity of few live pages: those are its count
        assert entity.entity_df(conn, list(ids.values())) == {ids["kafka"]: 2, ids["ledger"]: 31}
        monkeypatch.setattr(entity, "DF_LIVE_PROBE", 10)
        monkeypatch.setattr(entity, "DF_EXACT_MAX", 1000)
        assert entity.entity_df(conn, list(ids.values())) == {ids["kafka"]: 2, ids["ledger"]: 31}  # all exact
        monkeypatch.setattr(entity, "DF_EXACT_MAX", 20)
        monkeypatch.setattr(entity, "MAX_ENTITIES", 1)  # no room after the rare one: the common one is not counted
        assert entity.entity_df(conn, list(ids.values())) == {ids["kafka"]: 2}
    monkeypatch.setattr(entity, "MAX_ENTITIES", 16)
    top = _q(pool, "kafka ledger", [app])["hits"][0]
    assert top["path"] == "notes/kafka.md" and top["score_details"]["streams"]["entity"]["rank"] == 1


def test_a_link_to_another_projects_page_never_leaves_the_scope(pool, seeder):
    """A stale link (a page moved before its entities followed it) joins an entity of the
    searched project to a page of another: the entity stream drops that page."""
    app, lab = seeder.scope("default", "app"), seeder.scope("lab", "secret")
    mine = seeder.page(app, "notes/z.md", "# Z\nplain", entities=["Zanzibar"])
    theirs = seeder.page(lab, "notes/private.md", "# Private\nplain")
    seeder.conn.execute("INSERT INTO entity_page_links(entity_id, page_id) SELECT entity_id, ? FROM entity_page_links"
                        " WHERE page_id = ?", (theirs, mine))
    hits = _q(pool, "zanzibar", [app])["hits"]
    assert [h["page_id"] for h in hits] == [mine]
    assert theirs in [h["page_id"] for h in _q(pool, "zanzibar", None)["hits"]]  # a global search may see both


def test_an_entity_of_one_page_edited_many_times_stays_rare(pool, seeder, monkeypatch):
    """Superseded versions keep their links: an entity of one live page rewritten past
    ``DF_EXACT_MAX`` times still counts one page, and its page leads (found by a tester)."""
    monkeypatch.setattr(entity, "DF_EXACT_MAX", 20)
    app = seeder.scope("default", "app")
    for i in range(30):
        seeder.page(app, "notes/frob.md", f"# Widget tuning\nrevision {i}", entities=["Frobnicator"])
    for i in range(25):
        seeder.page(app, f"notes/l{i}.md", f"# Note {i}\nplain words", entities=["Ledger"])
    with pool.connection() as conn:
        ids = {name: eid for eid, name in conn.execute("SELECT id, name FROM entities")}
        assert entity.entity_df(conn, list(ids.values())) == {ids["frobnicator"]: 1, ids["ledger"]: 25}
    assert _q(pool, "frobnicator ledger", [app])["hits"][0]["path"] == "notes/frob.md"


def test_the_rarest_common_entities_are_the_ones_used(pool, seeder, monkeypatch):
    """Common entities fill what the rare ones leave by their link counts, rarest first, not by
    their age (found by a tester: the oldest were taken)."""
    monkeypatch.setattr(entity, "DF_EXACT_MAX", 5)
    monkeypatch.setattr(entity, "MAX_ENTITIES", 2)
    app = seeder.scope("default", "app")
    for name, pages in (("Alpha", 12), ("Bravo", 11), ("Quasar", 7)):  # Quasar made last
        for i in range(pages):
            seeder.page(app, f"notes/{name}-{i}.md", f"# {name} {i}\ntext", entities=[name])
    with pool.connection() as conn:
        ids = {name: eid for eid, name in conn.execute("SELECT id, name FROM entities")}
        assert entity.entity_df(conn, list(ids.values())) == {ids["quasar"]: 7, ids["bravo"]: 11}
