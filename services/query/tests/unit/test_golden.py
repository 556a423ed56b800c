"""Golden-set retrieval quality: hit@5 >= 0.9 over a realistic wiki, authority ordering.

The fixture wiki and questions are ``tests/data/golden_wiki.yaml``. Pages are loaded with
the SQL seeder (what a ``page.write`` stores); ranking is ``read.memory_query``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aimem_common.readpool import ReaderPool
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query
from aimem_testing.seed import Seeder

HERE = Path(__file__).resolve().parent
GOLDEN = yaml.safe_load((HERE.parent / "data" / "golden_wiki.yaml").read_text())


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    db = tmp_path_factory.mktemp("golden") / "memory.sqlite"
    seed = Seeder(db)
    scopes = {}
    for p in GOLDEN["pages"]:
        sc = scopes.setdefault(p["project"], seed.scope("default", p["project"]))
        fm = {k: v for k, v in p.items() if k not in ("project", "path", "body")}
        seed.page(sc, p["path"], p["body"], **fm)
    seed.close()
    pool = ReaderPool(db, size=1, wait_s=2)
    with pool.connection() as conn:
        yield conn, scopes
    pool.close()


def _top(conn, scopes, q, project="shop", k=5):
    res = memory_query(conn, q, [scopes[project]], options=QueryOptions(limit=k)).to_json()
    return [h["path"] for h in res["hits"]]


def test_golden_set_hit_at_5(golden):
    conn, scopes = golden
    queries = GOLDEN["queries"]
    assert len(queries) >= 40
    misses = []
    for item in queries:
        top = _top(conn, scopes, item["q"], item.get("project", "shop"))
        if item["expect"] not in top:
            misses.append((item["q"], item["expect"], top))
    hit_rate = 1 - len(misses) / len(queries)
    print(f"golden hit@5 = {hit_rate:.3f} ({len(queries) - len(misses)}/{len(queries)}); misses: {misses}")
    assert hit_rate >= 0.9, misses


def test_golden_set_mrr_reported(golden):
    conn, scopes = golden
    rr = []
    for item in GOLDEN["queries"]:
        top = _top(conn, scopes, item["q"], item.get("project", "shop"), k=10)
        rr.append(1 / (top.index(item["expect"]) + 1) if item["expect"] in top else 0.0)
    mrr = sum(rr) / len(rr)
    print(f"golden MRR@10 = {mrr:.3f}")
    assert mrr >= 0.75


@pytest.mark.parametrize("case", GOLDEN["ordering"], ids=lambda c: c["first"])
def test_authority_multiplier_ordering(golden, case):
    conn, scopes = golden
    top = _top(conn, scopes, case["q"], k=10)
    assert case["first"] in top and case["then"] in top, top
    assert top.index(case["first"]) < top.index(case["then"]), top


def test_scopes_and_global(golden):
    conn, scopes = golden
    both = memory_query(conn, "jetstream consumer stalled", [scopes["shop"], scopes["infra"]]).to_json()
    assert both["hits"][0]["project"] == "infra"
    glob = memory_query(conn, "certificate renewal acme", None).to_json()
    assert glob["hits"][0]["path"] == "runbooks/certificate-renewal.md"
    shop_only = memory_query(conn, "certificate renewal acme", [scopes["shop"]]).to_json()
    assert all(h["project"] == "shop" for h in shop_only["hits"])


def test_link_neighbours_surface(golden):
    conn, scopes = golden
    res = memory_query(conn, "why was checkout slow", [scopes["shop"]], options=QueryOptions(explain=True)).to_json()
    paths = [h["path"] for h in res["hits"]]
    assert "gotchas/n-plus-one-order-items.md" in paths
    assert "links" in res["streams_active"]
