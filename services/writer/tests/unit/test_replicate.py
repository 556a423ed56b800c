"""The writer's replicator: pushes the wiki after checkpoints, and a failing remote shows as lag."""

from __future__ import annotations

import asyncio
import subprocess

from aimem_common import config
from aimem_common.replication import read_status


def _replicator(wh, remote: str, **env):
    from aimem_writer.replicate import Replicator

    settings = config.load(wh.settings.data_dir, environ={"AIMEM_REPLICATION__GIT_REMOTE": remote,
                                                          "AIMEM_REPLICATION__LAG_ALERT_S": "10", **env})
    return settings, Replicator(settings, wh.wiki.head, wh.applier.metrics)


def test_checkpoints_reach_the_remote_and_lag_returns_to_zero(wh, tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--bare", "--quiet", "--initial-branch=main", str(remote)], check=True)
    settings, rep = _replicator(wh, str(remote))
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\ntext\n"})
    head = wh.applier.checkpoint()
    asyncio.run(rep.tick())
    pushed = subprocess.run(["git", "-C", str(remote), "rev-parse", "main"], capture_output=True, text=True).stdout
    assert pushed.strip() == head == rep.pushed
    st = read_status(settings)
    assert st["wiki"]["lag_s"] == 0.0 and not st["wiki"]["behind"] and st["wiki"]["error"] is None
    assert rep.lag.labels("wiki")._value.get() == 0.0


def test_an_unreachable_remote_is_retried_with_backoff_and_shows_as_lag(wh, tmp_path):
    settings, rep = _replicator(wh, str(tmp_path / "no-such-remote.git"))
    wh.ok("page.write", {"path": "concepts/a.md", "body": "# A\n\ntext\n"})
    wh.applier.checkpoint()
    asyncio.run(rep.tick())
    assert rep.pushed is None and rep.push_error and rep._backoff == 2.0
    st = read_status(settings, now=rep.behind_since + 60)
    assert st["wiki"]["lag_s"] >= 59 and st["wiki"]["behind"] is True and st["wiki"]["error"]
    asyncio.run(rep.tick())  # inside the backoff: no second attempt yet
    assert rep.pushes.labels("error")._value.get() == 1
