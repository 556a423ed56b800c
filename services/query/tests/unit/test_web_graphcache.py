"""Project link graphs drawn ahead and kept fresh (``web.graphcache.ProjectGraphs``): a kept
drawing is shown only while its project is unchanged, the largest projects are drawn at
startup, and a ``page.changed`` event redraws a viewed project in the background."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from aimem_common.read import pictures
from aimem_common.readpool import ReaderPool
from aimem_query.web.graphcache import ProjectGraphs
from aimem_query.web.hub import EventHub
from aimem_testing.seed import Seeder


@pytest.fixture
def store(tmp_path):
    seed = Seeder(tmp_path / "memory.sqlite")
    big, small = seed.scope("default", "big"), seed.scope("default", "small")
    for i in range(6):
        seed.page(big, f"n{i}.md", f"# N{i}\n[[n{(i + 1) % 6}]] [[n0]]")
    seed.page(small, "a.md", "# A\n[[b]]")
    seed.page(small, "b.md", "# B")
    pool = ReaderPool(seed.path, size=1, wait_s=2)
    yield SimpleNamespace(seed=seed, pool=pool, big=big, small=small)
    pool.close()
    seed.close()


async def _changed(hub: EventHub, scope) -> None:
    data = json.dumps({"action": "written", "workspace": scope.workspace, "project": scope.project}).encode()
    await hub._on_msg(SimpleNamespace(subject="aimem.evt.page.changed", data=data))


async def _until(cond, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.mark.asyncio
async def test_a_kept_drawing_is_shown_until_a_page_of_the_project_changes(store):
    graphs = ProjectGraphs(store.pool)
    data, pic = await graphs.get(store.big)
    with store.pool.connection() as conn:
        direct = pictures.project_graph(conn, store.big, max_nodes=150)
    assert [(n["id"], n["degree"]) for n in data["nodes"]] == [(n["id"], n["degree"]) for n in direct["nodes"]]
    assert data["edges"] == direct["edges"]
    assert data["nodes"][0]["path"] == "n0.md" and data["nodes"][0]["degree"] == 7  # n0: 5 backlinks + n5, n1
    assert [n["id"] for n in pic["nodes"]] == [n["id"] for n in data["nodes"]]
    assert (await graphs.get(store.big))[0] is data  # unchanged: the kept drawing
    store.seed.page(store.big, "n9.md", "# N9\n[[n3]]")
    fresh, _ = await graphs.get(store.big)
    assert fresh is not data and "n9.md" in {n["path"] for n in fresh["nodes"]}


@pytest.mark.asyncio
async def test_startup_draws_the_largest_projects_and_events_redraw_a_viewed_one(store):
    hub = EventHub()
    graphs = ProjectGraphs(store.pool, settle_s=0.05)
    graphs.start(hub, warm_projects=1)
    try:
        await _until(lambda: len(graphs._cache) == 1)
        assert next(iter(graphs._cache))[0] == store.big.project_id  # the larger project only
        before = dict(graphs._cache)
        store.seed.page(store.big, "n7.md", "# N7\n[[n2]]")
        await _changed(hub, store.big)
        await _until(lambda: len(graphs._cache) == 2)  # redrawn without a viewer
        key, (data, _) = next(reversed(graphs._cache.items()))
        assert key not in before and "n7.md" in {n["path"] for n in data["nodes"]}
        await _changed(hub, store.small)  # never viewed here: left for its first view
        await asyncio.sleep(0.2)
        assert len(graphs._cache) == 2
    finally:
        await graphs.stop()


@pytest.mark.asyncio
async def test_a_change_redraws_only_the_drawings_still_kept(store, monkeypatch):
    drawn: list[int] = []
    real = pictures.project_graph

    def counted(conn, scope, *, max_nodes):
        drawn.append(max_nodes)
        return real(conn, scope, max_nodes=max_nodes)

    monkeypatch.setattr(pictures, "project_graph", counted)
    hub = EventHub()
    graphs = ProjectGraphs(store.pool, keep=2, settle_s=0.05)
    graphs.start(hub, warm_projects=0)
    try:
        for n in (10, 20, 30):  # 10 falls out: only 20 and 30 are kept
            await graphs.get(store.big, n)
        drawn.clear()
        store.seed.page(store.big, "n8.md", "# N8\n[[n1]]")
        await _changed(hub, store.big)
        await _until(lambda: all("n8.md" in {n["path"] for n in d["nodes"]} for d, _ in graphs._cache.values()))
        assert sorted(key[1] for key in graphs._cache) == [20, 30] and sorted(drawn) == [20, 30]
    finally:
        await graphs.stop()


@pytest.mark.asyncio
async def test_a_purge_that_frees_the_newest_id_and_a_rename_both_draw_anew(store):
    """The key is the writer's graph version, not (newest page id, page count): a purge of the
    newest page lets the next page take its id back at the same count, and the drawing must
    still change; a rename changes every node's address, so it is drawn anew too."""
    graphs = ProjectGraphs(store.pool)
    seed, big = store.seed, store.big
    newest = seed.page(big, "n6.md", "# Old title\n[[n0]]")
    data, _ = await graphs.get(big)
    assert "Old title" in {n["title"] for n in data["nodes"]}
    seed.conn.execute("DELETE FROM pages WHERE id = ?", (newest,))  # as a purge does
    again = seed.page(big, "n7.md", "# New title\n[[n0]]")
    assert again == newest  # SQLite gave the freed id back: same newest id, same page count
    fresh, _ = await graphs.get(big)
    assert {n["title"] for n in fresh["nodes"]} >= {"New title"} and "Old title" not in {n["title"] for n in fresh["nodes"]}

    renamed = big.__class__(big.workspace, "renamed", big.workspace_id, big.project_id)
    seed.conn.execute("UPDATE projects SET name = 'renamed' WHERE id = ?", (big.project_id,))
    _, pic = await graphs.get(renamed)
    assert all("/renamed/" in n["href"] for n in pic["nodes"])
