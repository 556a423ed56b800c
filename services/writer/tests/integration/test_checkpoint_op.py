"""``wiki.checkpoint``: the writer commits its debounced checkpoint before it answers."""

from __future__ import annotations

import pygit2
import pytest

from aimem_common.commands import make_envelope

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_checkpoint_commits_pending_files_before_replying(services, bus, settings) -> None:
    services("writer", extra_env={"AIMEM_WRITER__GIT_DEBOUNCE_MS": "60000"})  # no timer checkpoint
    written = await bus.request(make_envelope("page.write", {"path": "notes/a.md", "body": "# A\nalpha"},
                                              project="p1"))
    repo = pygit2.Repository(str(settings.wiki_dir))
    assert any(p.endswith("notes/a.md") for p in repo.status())  # on disk, not committed yet
    reply = await bus.request(make_envelope("wiki.checkpoint", {}))
    repo = pygit2.Repository(str(settings.wiki_dir))
    assert reply["commit"] == str(repo.head.target)
    assert not [p for p in repo.status() if p.endswith(".md") and "log-" not in p]
    assert "page.write" in repo[repo.head.target].message
    assert written["page_id"] > 0
    again = await bus.request(make_envelope("wiki.checkpoint", {}))
    assert again["commit"] is None  # nothing dirty: no empty commit
