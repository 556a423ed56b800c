"""``aimem bootstrap``: the rule-based overview of a repository, and the page it writes.

The survey runs on this repository itself and must name what a newcomer needs first: its
five services, its two make commands (``make up``, ``make test``, first because the README
shows them) and its most-changed paths (checked against ``git log`` independently).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.bootstrap import render, survey
from aimem_cli.main import build_app

REPO = Path(__file__).resolve().parents[2]


def test_bootstrap_of_this_repository_names_services_make_commands_and_hot_paths():
    s = survey(REPO)
    title, body = render(s)
    assert s.name == "aimem" and title == "Overview of aimem"
    assert {"writer", "ingress", "query", "mcp-gateway", "maintainer"} <= {n for n, _ in s.components}
    for service in ("writer", "ingress", "query", "mcp-gateway", "maintainer"):
        assert f"**{service}** — `services/{service}/`" in body
    assert [c for c, _ in s.commands[:2]] == ["make up", "make test"]
    assert "- `make up` — creates .venv" in body and "- `make test` — installs and runs every test" in body
    log = subprocess.run(["git", "-C", str(REPO), "log", "-300", "--no-merges", "--name-only", "--format="],
                         capture_output=True, text=True, check=True).stdout
    counts = Counter(n for n in log.splitlines() if n.strip())
    top = counts.most_common(1)[0][1]
    hottest = {f for f, n in counts.items() if n == top}
    assert s.hot_files[0][1] == top and s.hot_files[0][0] in hottest
    assert f"- `{s.hot_files[0][0]}` ({top} commits)" in body
    assert s.active_paths and body.count("file changes)") == len(s.active_paths)
    assert len(body.encode()) < 15 * 1024


def test_bootstrap_of_a_bare_folder_has_no_empty_sections(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"name": "web", "scripts": {"test": "vitest"}}))
    title, body = render(survey(tmp_path))
    assert title == "Overview of web" and "- `npm run test` — vitest" in body
    assert "## Recent activity" not in body and "## Components" not in body


def test_bootstrap_print_needs_no_server(tmp_path):
    result = CliRunner().invoke(build_app(), ["bootstrap", str(REPO), "--print", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["path"] == "bootstrap.md"
    bad = CliRunner().invoke(build_app(), ["bootstrap", str(tmp_path / "missing")])
    assert bad.exit_code == 1 and "is not a directory" in bad.output
