"""Recorded search outputs, compared byte for byte: ``memory_query(..., explain=True)`` over the
golden wiki and the CJK, identifier, turns and scale vaults, the OpenAPI of ``/api/v1/search``
and the MCP tool contracts.

The goldens (``tests/data/goldens/*.json``) were recorded before search became a package of
streams (issue 28) and pin its behaviour: ranks, scores, explain details, raw hits and the
wire shapes. Timings (``stream_ms``) are the only part left out. A deliberate ranking change
re-records them: ``AIMEM_RECORD_GOLDENS=1 pytest services/query/tests/unit/test_search_goldens.py``,
and the diff of the JSON files shows what it changed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aimem_common.config import Settings
from aimem_common.readpool import ReaderPool
from aimem_common.search.question import QueryOptions, QueryVector
from aimem_common.search.query import memory_query
from aimem_testing.seed import Seeder

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDENS = DATA / "goldens"
RECORD = os.environ.get("AIMEM_RECORD_GOLDENS") == "1"
TIMINGS = ("stream_ms", "query_embed_ms")

ZH = "我们决定使用读写分离的缓存策略来降低数据库压力。"
JA = "本番環境へのデプロイはブルーグリーン方式で行います。"
KO = "데이터베이스를 연결할 때 커넥션 풀을 사용합니다."
TH = "เราใช้แคชเพื่อลดภาระของฐานข้อมูล"

# A vault: (seed it, then the searches to record: (question, project names or None = global, options)).
Search = tuple[str, list[str] | None, dict[str, Any]]


def _golden_wiki(seed: Seeder) -> list[Search]:
    wiki = yaml.safe_load((DATA / "golden_wiki.yaml").read_text())
    scopes: dict[str, Any] = {}
    for p in wiki["pages"]:
        sc = scopes.setdefault(p["project"], seed.scope("default", p["project"]))
        seed.page(sc, p["path"], p["body"], **{k: v for k, v in p.items() if k not in ("project", "path", "body")})
    shop = scopes["shop"]
    seed.page(shop, "notes/old-deploy-tip.md", "# Deploy tip\nDeploy to production with the fabric script.")
    seed.page(shop, "notes/old-deploy-tip.md", "# Deploy tip\nDeploy to production by merging to main.")  # supersedes
    seed.page(shop, "notes/expired-outage.md", "# Outage notice\nCheckout outage today, payments degraded.",
              expires_at="2020-01-01T00:00:00+00:00")
    out: list[Search] = [(q["q"], [q.get("project", "shop")], {}) for q in wiki["queries"]]
    out += [(c["q"], ["shop"], {}) for c in wiki["ordering"]]
    out += [("jetstream consumer stalled", ["shop", "infra"], {}), ("certificate renewal acme", None, {}),
            ("deploy to production", ["shop"], {"include_superseded": True}),
            ("checkout outage payments", ["shop"], {"include_expired": True}),
            ("checkout outage payments", ["shop"], {}), ("why was checkout slow", ["shop"], {"limit": 3}),
            ("", ["shop"], {}), ("AND OR NOT \"(*", ["shop"], {})]
    return out


def _scripts(seed: Seeder) -> list[Search]:
    app = seed.scope("default", "app")
    for path, body in [("decisions/cache.md", f"# 架构决定\n{ZH}"), ("procedures/deploy.md", f"# 本番リリース手順\n{JA}"),
                       ("concepts/pool.md", f"# 커넥션\n{KO}"), ("notes/thai.md", f"# บันทึก\n{TH}"),
                       ("notes/cafe.md", "# Réunion\nLe café de l'équipe est à Zürich, Straße 5. Naïve résumé."),
                       ("notes/english.md", "# Cache strategy\nWe split reads and writes to lower database load.")]:
        seed.page(app, path, body)
    many = seed.scope("default", "many")
    for i in range(80):
        seed.page(many, f"notes/n{i}.md", f"这里是数据{chr(0x4E00 + i * 7)}相关的记录", title=f"记录{i}")
    seed.page(many, "decisions/db.md", "我们的数据库迁移计划已经确定。", title="迁移")
    seed.page(many, "notes/cat.md", "nothing here", title="我的猫")
    mixed = seed.scope("default", "mixed")
    seed.page(mixed, "notes/k8s.md", "東京リージョンのKubernetesクラスタを更新した。", title="更新")
    seed.page(mixed, "notes/redis.md", "我们使用Redis缓存热点数据，TTL为300秒。", title="缓存")
    seed.page(mixed, "notes/en.md", "Nothing about clusters here. We deploy with helm charts.", title="English")
    seed.page(mixed, "notes/zh.md", "我们用 helm 部署。", title="部署")
    seed.page(mixed, "notes/fold.md", "Ame\u0301lie signed the contract in İstanbul.", title="meeting")
    qs = ["缓存", "数据库", "读写分离", "缓存策略是什么？", "压力", "デプロイ", "ブルーグリーン", "本番環境", "デプロイ方式は？",
          "데이터베이스", "커넥션 풀", "연결", "연결을", "커넥션은", "ฐานข้อมูล", "cafe", "Café", "zurich", "Straße",
          "naive resume", "lower database load"]
    out: list[Search] = [(q, ["app"], {}) for q in qs]
    out += [(q, ["many"], {}) for q in ("数据", "数", "数据库", "猫")]
    out += [(q, ["mixed"], {}) for q in ("Kubernetes", "kubernetes", "TTL", "300", "redis", "Redis 缓存", "helm",
                                         "Amélie", "amelie", "İSTANBUL", "istanbul")]
    out += [("缓存", None, {}), ("数据", ["many", "mixed"], {})]
    return out


def _identifiers(seed: Seeder) -> list[Search]:
    app = seed.scope("default", "app")
    for i in range(1000):
        if i < 5:
            seed.page(app, f"decisions/pool-{i}.md",
                      f"# Connection pool timeout in the payment worker {i}\nThe connection pool timeout hits the "
                      f"payment worker. See [[decisions/pool-{(i + 1) % 5}.md]] and [[decisions/pool-{(i + 2) % 5}.md]].",
                      entities=["connection pool", "payment worker"], tags=["canonical"], pinned=True)
        else:
            seed.page(app, f"notes/pool-{i}.md", f"# Note {i}\nA connection pool timeout hit the payment worker.")
    seed.page(app, "sessions/s-77.md", "# Session s-77\nSaw ERR_4711 from parseLedgerBatch in the "
              "payment worker during a connection pool timeout.", session_id="s-77")
    ver = seed.scope("default", "ver")
    for i in range(300):
        other = f"2.{i % 7}.{i % 5 + 2}" if i % 2 else f"1.2.3.{i % 9 + 2}"
        seed.page(ver, f"notes/upgrade-{i}.md",
                  f"# Upgrade note {i}\nThe upgrade to {other} broke the build of the payment worker.",
                  tags=["canonical"] if i < 5 else [])
    seed.page(ver, "sessions/s-9.md", "# Session s-9\nThe upgrade to 2.3.1 broke the build.", session_id="s-9")
    for path, body in [("a", "Do steps 2, 3, 1 in that order for the upgrade."), ("b", "Gateway 192.2.3.1 for the upgrade."),
                       ("c", "libfoo 1.2.3.1 for the upgrade"), ("e", "Meeting at 2-3-1 upgrade"),
                       ("f", "Upgrade to 2.3.10 later."), ("d", "Upgrade to 2.3.1 tomorrow."),
                       ("v", "The regression shipped in v2.3.1 (parser).")]:
        seed.page(ver, f"notes/{path}.md", f"# {path}\n{body}")
    return [(q, ["app"], {}) for q in ("ERR_4711 connection pool timeout payment worker",
                                       "connection pool timeout payment worker err_4711",
                                       "why does parseLedgerBatch fail with a connection pool timeout in the payment worker?",
                                       "pool_timeout connection")] + \
        [(q, ["ver"], {}) for q in ("why did the upgrade to 2.3.1 break the build of the payment worker?",
                                    "upgrade 3.12 build", "2.3.1", "v2.3.1 parser")] + \
        [("ERR_4711", None, {"limit": 3})]


def _turns(seed: Seeder) -> list[Search]:
    app = seed.scope("default", "app")

    def session(sid: str, turns: dict[int, str], n: int = 30) -> None:
        seed.page(app, f"sessions/{sid}.md", f"# Session {sid}\nA digest of small talk.", session_id=sid)
        for i in range(n):
            seed.observation(app, sid, "user-prompt", turns.get(i, f"turn {i}: small talk about the weather"))
        seed.end_session(app, sid)

    session("s-far", {6: "the ledger moved to postgres", 25: "partitions of the old disk"})
    session("s-near", {6: "the ledger moved to postgres", 7: "with monthly partitions"})
    session("s-name", {i: f"Priya says hello again, Priya {i}" for i in range(12)}, n=12)
    session("s-rare", {**{i: f"Priya talks {i}" for i in range(12)}, 3: "Priya on terraform"}, n=12)
    filler = "\n".join(f"- item {i} of the checklist" for i in range(20))
    seed.page(app, "notes/spread.md", f"# Storage\n- the ledger on postgres\n{filler}\n- partitions")
    seed.page(app, "notes/near.md", f"# Storage\n- the ledger on postgres\n- partitions\n{filler}")
    run, other = seed.scope("default", "run"), seed.scope("default", "other")
    for i in range(30):
        seed.page(run, f"notes/pool-{i}.md", f"# Pool note {i}\nA connection pool timeout hit the payment worker.")
    seed.observation(run, "s-idle", "user-prompt", "lunch order for friday")
    seed.observation(run, "s-live", "post-tool-use",
                     "pytest: ERR_9921 raised by parseLedgerBatch on a connection pool timeout", title="Bash")
    for i in range(6):
        seed.observation(run, "s-busy", "post-tool-use", f"retry {i}: ERR_9921 again")
    seed.observation(run, "s-ended", "user-prompt", "ERR_9921 seen last month")
    seed.end_session(run, "s-ended")
    seed.observation(other, "s-elsewhere", "user-prompt", "ERR_9921 in the other project")
    seed.observation(run, "run1", "user-prompt", ZH)
    seed.observation(run, "run1", "tool-output", f"{JA}\nexit 0 — ok ✓", title="Bash")
    seed.observation(run, "run2", "user-prompt", "これは猫")
    seed.page(run, "sessions/s-cjk.md", "# Session s-cjk\n会话摘要", session_id="s-cjk")
    seed.observation(run, "s-cjk", "user-prompt", "部署时使用蓝绿方式，缓存先预热。")
    seed.end_session(run, "s-cjk")
    q = "ERR_9921 connection pool timeout payment worker"
    return [("ledger postgres partitions", ["app"], {}), ("Priya terraform", ["app"], {}),
            ("ledger postgres partitions", None, {}), (q, ["run"], {}), (q, ["run"], {"raw_limit": 2}),
            (q, None, {}), ("payment worker pool", ["run"], {}), ("lunch friday", ["run"], {}),
            ("缓存", ["run"], {}), ("デプロイ", ["run"], {}), ("猫", ["run"], {}), ("蓝绿方式", ["run"], {}),
            ("nothing matches this at all", ["run"], {})]


def _scale(seed: Seeder) -> list[Search]:
    app, infra = seed.scope("default", "app"), seed.scope("default", "infra")
    for i in range(300):
        seed.page(app if i % 3 else infra, f"notes/n{i}.md", f"# Note {i}\nbody {i} about the ledger service")
    for i in range(0, 40, 2):
        seed.page(app, f"notes/n{i + 1}.md", f"# Note {i + 1}\nnew body of the ledger")
    for i in range(30):
        seed.page(app, f"notes/l{i}.md", f"# Ledger note {i}\nplain words", entities=["Ledger"])
    seed.page(app, "notes/kafka.md", "# Kafka\nold text", entities=["Kafka", "Ledger"])
    seed.page(app, "notes/kafka.md", "# Kafka\nnew text", entities=["Kafka", "Ledger"])
    seed.page(app, "notes/kafka-2.md", "# Kafka again\ntext", entities=["Kafka"])
    for i in range(30):
        seed.page(app, "notes/frob.md", f"# Widget tuning\nrevision {i}", entities=["Frobnicator"])
    for name, pages in (("Alpha", 12), ("Bravo", 11), ("Quasar", 7)):
        for i in range(pages):
            seed.page(app, f"notes/{name}-{i}.md", f"# {name} {i}\ntext [[notes/kafka.md]]", entities=[name])
    lab = seed.scope("lab", "secret")
    mine = seed.page(app, "notes/z.md", "# Z\nplain", entities=["Zanzibar"])
    theirs = seed.page(lab, "notes/private.md", "# Private\nplain")
    seed.conn.execute("INSERT INTO entity_page_links(entity_id, page_id) SELECT entity_id, ? FROM entity_page_links"
                      " WHERE page_id = ?", (theirs, mine))
    return [("kafka ledger", ["app"], {}), ("frobnicator ledger", ["app"], {}), ("alpha bravo quasar", ["app"], {}),
            ("zanzibar", ["app"], {}), ("zanzibar", None, {}), ("ledger service body", ["app", "infra"], {"limit": 25}),
            ("ledger", None, {"limit": 40}), ("kafka", ["app"], {"include_superseded": True}),
            ("migrations of the ledgers", ["app"], {})]


def _vectors(seed: Seeder) -> list[Search]:
    """Chunk vectors of a fake embedder (``hash_embed``): the vector stream alone, beside words,
    a chunk past the first window, a stale row (old content hash) and another model's rows."""
    import numpy as np

    from aimem_common.chunking import chunks, units_of
    from aimem_testing.fake_llm import hash_embed

    def embed(pid: int, title: str, body: str, model: str = "m", stale: bool = False) -> None:
        h = "old" if stale else seed.conn.execute("SELECT content_hash FROM pages WHERE id = ?", (pid,)).fetchone()[0]
        seed.conn.executemany(
            "INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector, content_hash, created_at)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(pid, i, "fake", model, VECTOR_DIM, np.asarray(hash_embed(t, VECTOR_DIM), dtype="<f4").tobytes(), h,
              seed.tick()) for i, t in enumerate(chunks(title, units_of(body)))])

    app = seed.scope("default", "app")
    filler = "\n".join(f"Minute{i} topic{i} owner{i} budget{i} staffing{i} roadmap{i}." for i in range(120))
    pages = [("notes/status.md", "Status", filler + "\nThe backup drill restores the ledger replica from cold storage."),
             ("notes/canteen.md", "Canteen", "The canteen menu and parking for visitors."),
             ("decisions/backup.md", "Backup policy", "Backups run nightly; the drill restores one replica a month."),
             ("notes/ledger.md", "Ledger", "The ledger service keeps balances [[decisions/backup.md]]."),
             ("sessions/s-1.md", "Session s-1", "We talked about cold storage costs and the restore drill.")]
    for i, (path, title, body) in enumerate(pages):
        pid = seed.page(app, path, f"# {title}\n{body}", session_id="s-1" if path.startswith("sessions/") else None)
        embed(pid, title, body, model="other" if i == 3 else "m", stale=(i == 1))
    return [("zzzz", ["app"], {"vector": "The backup drill restores the ledger replica from cold storage."}),
            ("backup drill", ["app"], {"vector": "restore a replica from cold storage"}),
            ("ledger balances", ["app"], {"vector": "canteen menu parking"}),
            ("cold storage", None, {"vector": "cold storage restore drill", "limit": 3})]


VECTOR_DIM = 64
VAULTS: dict[str, Callable[[Seeder], list[Search]]] = {
    "golden_wiki": _golden_wiki, "cjk": _scripts, "identifiers": _identifiers, "turns": _turns, "scale": _scale,
    "vectors": _vectors,
}


def _strip(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in TIMINGS}


def _run_vault(tmp: Path, build: Callable[[Seeder], list[Search]]) -> list[dict[str, Any]]:
    db = tmp / "memory.sqlite"
    seed = Seeder(db)
    searches = build(seed)
    seed.close()
    pool = ReaderPool(db, size=1, wait_s=2)
    out = []
    try:
        with pool.connection() as conn:
            from aimem_common.read import scopes as scopes_mod
            from aimem_testing.fake_llm import hash_embed

            for q, projects, kw in searches:
                scopes = None if projects is None else [scopes_mod.resolve_ref(conn, p, default_workspace="default")
                                                        for p in projects]
                opts = {k: v for k, v in kw.items() if k != "vector"}
                vector = QueryVector(hash_embed(kw["vector"], VECTOR_DIM), "fake", "m", VECTOR_DIM) if "vector" in kw else None
                res = memory_query(conn, q, scopes, options=QueryOptions(explain=True, **opts), vector=vector).to_json()
                out.append({"query": q, "projects": projects, "options": kw, "result": _strip(res)})
    finally:
        pool.close()
    return out


def _compare(name: str, actual: Any) -> None:
    path = GOLDENS / f"{name}.json"
    text = json.dumps(actual, ensure_ascii=False, indent=1) + "\n"
    if RECORD:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    expected = json.loads(path.read_text())
    if name.startswith(("memory_query", "service")):  # name the first search that differs: a readable failure
        assert len(actual) == len(expected), name
        for got, want in zip(json.loads(text), expected):
            assert got == want, (name, {k: v for k, v in want.items() if k != "result"})
    assert text == path.read_text(), f"{name}: same values, different key order or formatting"


@pytest.mark.parametrize("vault", list(VAULTS))
def test_memory_query_explain_matches_the_goldens(tmp_path, vault):
    _compare(f"memory_query_{vault}", _run_vault(tmp_path, VAULTS[vault]))


# Searches through the service (``Searcher.search`` as root): scope resolution, the ``_global``
# project's hits beside a default-scoped search, limits and explain from the settings.
SERVICE_SEARCHES: list[dict[str, Any]] = [
    {"query": "how do we deploy to production", "project": "shop"},
    {"query": "how do we deploy to production", "project": "shop", "explain": True, "limit": 3},
    {"query": "tabs or spaces", "project": "shop"},
    {"query": "tabs or spaces", "project": "_global"},
    {"query": "jetstream consumer stalled", "scopes": ["shop", "default/infra"]},
    {"query": "certificate renewal", "global_": True, "limit": 4},
    {"query": "refund twice", "workspace": "default", "project": "shop", "include_superseded": True},
]


def service_results(tmp: Path, search: Callable[[ReaderPool, Settings, dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """Seed the golden wiki plus a ``_global`` project, run ``SERVICE_SEARCHES`` through ``search``."""
    db = tmp / "memory.sqlite"
    seed = Seeder(db)
    _golden_wiki(seed)
    prefs = seed.scope("default", "_global")
    seed.page(prefs, "_rules/style.md", "# Style preferences\nIndent with spaces, never tabs. Deploy on Tuesdays.")
    seed.page(prefs, "notes/editor.md", "# Editor\nThe user prefers short answers and production checklists.")
    seed.close()
    pool = ReaderPool(db, size=1, wait_s=2)
    settings = Settings(data_dir=tmp / "data")
    try:
        return [{"search": kw, "result": _strip(asyncio.run(search(pool, settings, kw)))} for kw in SERVICE_SEARCHES]
    finally:
        pool.close()


def test_service_search_matches_the_golden(tmp_path):
    from aimem_common.auth import ROOT
    from aimem_common.search.params import SearchParams
    from aimem_common.search.service import Searcher

    def search(pool, settings, kw):
        return Searcher(pool=pool, settings=settings).search(ROOT, SearchParams(**kw))

    async def search_json(pool, settings, kw):
        return (await search(pool, settings, kw)).to_json()

    _compare("service_search", service_results(tmp_path, search_json))


def test_search_openapi_matches_the_golden(tmp_path):
    from aimem_query.app import create_app

    spec = create_app(Settings(data_dir=tmp_path)).openapi()
    used: dict[str, Any] = {"paths": {"/api/v1/search": spec["paths"]["/api/v1/search"]}, "schemas": {}}
    todo = [json.dumps(used["paths"])]
    while todo:  # the component schemas the two operations reference, transitively
        for ref in sorted({part.split('"')[0] for part in todo.pop().split('"#/components/schemas/')[1:]}):
            if ref not in used["schemas"]:
                used["schemas"][ref] = spec["components"]["schemas"][ref]
                todo.append(json.dumps(used["schemas"][ref]))
    _compare("openapi_search", used)


def test_mcp_tool_contracts_match_the_golden():
    from aimem_mcp import tooltable

    listed = asyncio.run(tooltable.list_tools())
    _compare("mcp_tools", [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed])
