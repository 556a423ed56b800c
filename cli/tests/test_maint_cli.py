"""``aimem forget-sweep|lint|embed|pending-writes|auto-improve-report|curator`` against real writer + maintainer processes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

pytestmark = pytest.mark.integration


def test_maint_commands_over_nats(settings, services, monkeypatch, tmp_path):
    services("writer", "maintainer")
    monkeypatch.setenv("AIMEM_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("AIMEM_BUS__NATS_URL", settings.bus.nats_url)
    runner, app = CliRunner(), build_app()
    import asyncio

    from aimem_common import bus as busmod
    from aimem_common.commands import make_envelope

    async def seed() -> None:
        nc = await busmod.connect(settings.bus, name="t", reconnect=False)
        b = busmod.Bus(nc, settings.bus)
        await b.request(make_envelope("page.write", {"path": "notes/cold.md", "body": "x",
                                                     "frontmatter": {"salience": 0.05}}, project="alpha"))
        for path in ("concepts/retry.md", "gotchas/retry.md"):
            await b.request(make_envelope("page.write", {"path": path, "title": "Retry", "body": "Retry twice."},
                                          project="alpha"))
        await nc.close()

    asyncio.run(seed())
    res = runner.invoke(app, ["forget-sweep", "--dry-run", "-p", "alpha"])
    assert res.exit_code == 0, res.output
    assert "would expire 0, evict 1" in res.output and "notes/cold.md" in res.output
    res = runner.invoke(app, ["forget-sweep", "--all", "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)["scopes"][0]["applied"]["evicted"]) == 1
    res = runner.invoke(app, ["lint", "-p", "alpha", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["report"]["path"] == "_lint/report.md"
    res = runner.invoke(app, ["pending-writes", "list", "--all"])
    assert res.exit_code == 0 and "no proposals" in res.output
    res = runner.invoke(app, ["embed", "--all"])
    assert res.exit_code == 0 and "no embedder configured" in res.output
    res = runner.invoke(app, ["auto-improve", "-p", "alpha"])
    assert res.exit_code == 1 and "llm_not_configured" in res.output
    res = runner.invoke(app, ["lint", "-p", "nope"])
    assert res.exit_code == 1 and "not found" in res.output
    # Zero-LLM verbs: the report of a project auto-improve never ran in, and the curator.
    res = runner.invoke(app, ["auto-improve-report", "-p", "alpha"])
    assert res.exit_code == 0, res.output
    assert "default/alpha: reviews none; proposals none; rejected by none; acceptance n/a" in res.output
    res = runner.invoke(app, ["auto-improve-report", "-p", "alpha", "--stage", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["report"]["path"] == "_lint/auto-improve-report.md"
    res = runner.invoke(app, ["curator", "-p", "alpha"])
    assert res.exit_code == 0, res.output
    assert "merge   concepts/retry.md + gotchas/retry.md: same title" in res.output
    res = runner.invoke(app, ["curator", "-p", "nope"])
    assert res.exit_code == 1 and "not found" in res.output
