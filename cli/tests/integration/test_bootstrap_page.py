"""``aimem bootstrap`` against real processes: the page is written, a re-run supersedes it."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

pytestmark = pytest.mark.integration
ROOT_TOKEN = "root-token-for-tests"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e", *args],
                   check=True, capture_output=True)


def test_bootstrap_writes_the_page_and_a_rerun_supersedes_it(settings, services, tmp_path):
    settings.auth.token = ROOT_TOKEN
    url = services("writer", "query")["query"].url
    repo = tmp_path / "shop"
    (repo / "services" / "cart").mkdir(parents=True)
    (repo / "README.md").write_text("# Shop\n\nA small shop.\n\n```sh\nmake run   # start it\n```\n")
    (repo / "Makefile").write_text("run:\n\techo run\ncheck:\n\techo check\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "cart service skeleton")
    env = {"AIMEM_SERVER_URL": url, "AIMEM_AUTH__TOKEN": ROOT_TOKEN, "AIMEM_DATA_DIR": str(settings.data_dir)}
    app = build_app()

    first = CliRunner().invoke(app, ["bootstrap", str(repo)], env=env)
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("created default/shop:bootstrap.md")
    (repo / "services" / "payments").mkdir()
    (repo / "services" / "payments" / "x.py").write_text("pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "payments service")
    second = CliRunner().invoke(app, ["bootstrap", str(repo)], env=env)
    assert second.exit_code == 0 and second.stdout.startswith("updated default/shop:bootstrap.md"), second.output

    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    rows = conn.execute("SELECT is_latest, retired_reason, body FROM pages WHERE path = 'bootstrap.md' ORDER BY id").fetchall()
    conn.close()
    assert [(r[0], r[1]) for r in rows] == [(0, "superseded"), (1, None)]
    assert "**payments**" not in rows[0][2] and "**payments**" in rows[1][2] and "`make run` — start it" in rows[1][2]

    (repo / ".aimem.toml").write_text("capture = false\n")
    refused = CliRunner().invoke(app, ["bootstrap", str(repo)], env=env)
    assert refused.exit_code == 1 and "capture = false" in refused.output
