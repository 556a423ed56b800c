"""`aimem reindex --data-dir`: rebuild an empty DB from the wiki; refuses with rows or a live writer."""

from __future__ import annotations

import subprocess
import sys


def aimem(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aimem_cli", *args], capture_output=True, text=True, timeout=60)


def test_reindex_cli(wh) -> None:
    wh.ok("page.write", {"path": "concepts/a.md", "body": "alpha"})
    data_dir = str(wh.settings.data_dir)
    refused = aimem("reindex", "--data-dir", data_dir)
    assert refused.returncode == 1 and "already has rows" in refused.stderr
    wh.close()
    for p in wh.settings.db_path.parent.glob("memory.sqlite*"):
        p.unlink()
    done = aimem("reindex", "--data-dir", data_dir)
    assert done.returncode == 0, done.stderr
    assert "reindexed 1 pages in 1 projects of 1 workspaces" in done.stdout
    from aimem_common.db.connect import open_writer

    wh.conn = open_writer(wh.settings.db_path)
    assert wh.count("SELECT count(*) FROM pages WHERE path='concepts/a.md'") == 1
