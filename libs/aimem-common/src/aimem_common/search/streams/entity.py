"""entity: frontmatter ``entities`` whose normalised name equals a 1–4-word n-gram of the question.

A page scores Σ idf over the entities it carries, idf = ln(1 + N / df) over the live pages in
scope (N) and the entity's pages (df).
"""

from __future__ import annotations

import math
import sqlite3

from aimem_common.read.text import words
from aimem_common.search.sql import live_page_count, marks, scope_sql
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 0.8
MAX_ENTITY_NGRAM = 4
MAX_GRAMS = 900  # n-grams looked up (an SQL IN list)
MAX_ENTITIES = 16  # matched entities used per query (rarest first)
MAX_PAGES_PER_ENTITY = 500
# An entity linked from more pages than this is common: its document frequency is its link count
# (an index range count; links of superseded or deleted pages included) rather than its live pages
# (a page lookup per link: 13-33 ms for an entity of 21,000 pages at 1M, most of the stream).
DF_EXACT_MAX = 256
# A common entity used is first looked up to this many live pages: fewer, and they are its count
# (one page edited hundreds of times keeps the links of every version it superseded).
DF_LIVE_PROBE = 32

# Each entity's newest MAX_PAGES_PER_ENTITY live pages (one SELECT per entity, UNION ALL'ed).
_ONE = ("SELECT page_id, ? AS eid, ? AS idf FROM (SELECT l.page_id FROM entity_page_links l"
        " JOIN pages p INDEXED BY pages_live ON p.id = l.page_id AND p.is_latest = 1"
        " WHERE l.entity_id = ? ORDER BY l.page_id DESC LIMIT ?)")


@stream("entity", weight=WEIGHT)
def rank(run: Run) -> Ranked | None:
    """Pages carrying the question's entities: ``[(page_id, Σ idf)]`` best first, len ≤
    ``candidates``; with explain, ``run.matched_entities`` gets each ranked page's entity names."""
    conn, scopes = run.conn, run.scopes
    names = _matching_entities(conn, run.question.text, scopes)
    if not names:
        return []
    df = entity_df(conn, list(names))
    if not df:
        return []
    total = live_page_count(conn, scopes) or 1
    # The rarest entities carry the signal; a very common one adds little idf but many rows.
    chosen = sorted(df, key=lambda e: (df[e], e))[:MAX_ENTITIES]
    # Summed by page inside SQLite (up to 16 × 500 rows: a Python loop over them was most of the
    # stream's CPU at 1M pages). The sums are rounded for the order, so equal sets of entities
    # tie on page id whatever order SQLite added them in.
    union = " UNION ALL ".join([_ONE] * len(chosen))
    uargs = [x for eid in chosen for x in (eid, math.log(1 + total / df[eid]), eid, MAX_PAGES_PER_ENTITY)]
    ranked = [(pid, float(sc)) for pid, sc in conn.execute(
        f"SELECT page_id, sum(idf) AS s FROM ({union}) GROUP BY page_id ORDER BY round(s, 9) DESC, page_id LIMIT ?",
        [*uargs, run.opts.candidates]).fetchall()]
    if run.opts.explain and ranked:  # which entities each ranked page matched
        top = {pid for pid, _ in ranked}
        for pid, eid, _idf in conn.execute(union, uargs).fetchall():
            if pid in top:
                run.matched_entities.setdefault(pid, []).append(names[eid])
    return ranked


def _matching_entities(conn: sqlite3.Connection, text: str, scopes) -> dict[int, str]:
    """The scope's entities named by a 1–``MAX_ENTITY_NGRAM``-word n-gram of ``text``: ``{id: display name}``.

    A plural word also tries its singular ("migrations" finds the entity "migration").
    """
    toks = words(text)
    grams: set[str] = set()
    for n in range(1, MAX_ENTITY_NGRAM + 1):
        for i in range(len(toks) - n + 1):
            g = " ".join(toks[i : i + n])
            grams.add(g)
            if n == 1 and len(g) > 3 and g.endswith("s"):
                grams.add(g[:-1])
        if len(grams) > MAX_GRAMS:
            break
    if not grams:
        return {}
    grams_l = sorted(grams)[:MAX_GRAMS]
    where, args = scope_sql(scopes, "e.project_id")
    ents = conn.execute(
        f"SELECT e.id, e.display_name FROM entities e WHERE e.name IN ({marks(len(grams_l))}){where}",
        [*grams_l, *args],
    ).fetchall()
    return {e[0]: e[1] for e in ents}


def entity_df(conn: sqlite3.Connection, ids: list[int]) -> dict[int, int]:
    """Document frequency of the rarest ``MAX_ENTITIES`` entities of ``ids`` that a live page
    links: ``{entity id: pages}``, for choosing them and weighing them (idf).

    An entity of at most ``DF_EXACT_MAX`` links (index range counts, stopped past it) gets its
    live, latest pages counted exactly (each link looked up in ``pages_live``, a covering index
    of the live ids: see migration 10). A commoner one is ranked by its links (superseded
    and deleted versions included), and those the rare ones leave room for, rarest first, are
    looked up to ``DF_LIVE_PROBE`` live pages: an entity of a few pages edited hundreds of times
    keeps its exact count; above that its links are the count. Counting every common
    entity's live pages (a page lookup per link) made this stream 87 / 200 ms (p50 / p95) of a
    global search at 1M pages whose words were all common.
    """
    links = dict(conn.execute(
        "SELECT e.id, (SELECT count(*) FROM (SELECT 1 FROM entity_page_links l WHERE l.entity_id = e.id LIMIT ?))"
        f" FROM entities e WHERE e.id IN ({marks(len(ids))})", [DF_EXACT_MAX + 1, *ids]).fetchall())
    rare = [e for e, n in links.items() if 0 < n <= DF_EXACT_MAX]
    df: dict[int, int] = {}
    if rare:
        df.update(conn.execute(
            "SELECT l.entity_id, count(*) FROM entity_page_links l JOIN pages p INDEXED BY pages_live"
            f" ON p.id = l.page_id AND p.is_latest = 1 WHERE l.entity_id IN ({marks(len(rare))})"
            " GROUP BY l.entity_id", rare).fetchall())
    common = [e for e, n in links.items() if n > DF_EXACT_MAX]
    if len(df) < MAX_ENTITIES and common:
        full = {e: conn.execute("SELECT count(*) FROM entity_page_links WHERE entity_id = ?", (e,)).fetchone()[0]
                for e in common}
        for e in sorted(common, key=lambda e: (full[e], e)):
            if len(df) >= MAX_ENTITIES:
                break
            live = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM entity_page_links l JOIN pages p INDEXED BY pages_live"
                " ON p.id = l.page_id AND p.is_latest = 1 WHERE l.entity_id = ? LIMIT ?)",
                (e, DF_LIVE_PROBE + 1)).fetchone()[0]
            if live:
                df[e] = live if live <= DF_LIVE_PROBE else full[e]
    return df
