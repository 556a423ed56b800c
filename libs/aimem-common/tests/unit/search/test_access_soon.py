"""``Searcher.record_access_soon``: the caller answers before the ``page.access`` PubAck."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aimem_common.config import Settings
from aimem_common.search.access import AccessThrottle
from aimem_common.search.hits import Hit
from aimem_common.search.result import SearchResult
from aimem_common.search.service import Searcher


class SlowBus:
    """A bus whose PubAck arrives only when the test releases it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.published: list = []

    async def publish(self, env):
        await self.release.wait()
        self.published.append(env)


def hit(pid: int) -> Hit:
    return Hit(path=f"notes/{pid}.md", title="t", score=1.0, kind="note", tier="semantic", workspace="default",
               project="app", page_id=pid, updated_at="2026-01-01T00:00:00Z", pinned=False, tags=[])


def test_the_bump_is_published_after_the_caller_moved_on(tmp_path: Path):
    async def go() -> None:
        bus = SlowBus()
        searcher = Searcher(pool=None, settings=Settings(data_dir=tmp_path), bus=bus, throttle=AccessThrottle())
        searcher.record_access_soon(SearchResult(hits=[hit(1), hit(2)]), actor="root")
        await asyncio.sleep(0.01)
        assert bus.published == [] and len(searcher._bumps) == 1  # still waiting, the caller was not
        bus.release.set()
        await asyncio.sleep(0.01)
        assert [env.payload["page_ids"] for env in bus.published] == [[1, 2]] and not searcher._bumps

    asyncio.run(go())
