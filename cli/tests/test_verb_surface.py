"""The operator verbs the original system has (issue 30's list) exist here: each answers
``--help`` with its description and is named in README's CLI section."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

README = Path(__file__).resolve().parents[2] / "README.md"

VERBS = ["reset", "compact", "commit", "llm-test", "message", "message send", "message list", "message pop",
         "message cancel", "setup-agent", "install-instructions", "install-skills", "uninstall",
         "generate-auth-token", "backup-agents", "restore-agents", "reorg", "handoffs", "delete-workspace",
         "curator", "auto-improve-report", "profile", "profile list", "profile add", "profile remove"]


@pytest.mark.parametrize("verb", VERBS)
def test_verb_has_help_and_a_readme_line(verb: str) -> None:
    r = CliRunner().invoke(build_app(), [*verb.split(), "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Usage: aimem " + verb in r.output and len(r.output.split("Options")[0]) > 60
    cli_section = README.read_text().split("## The aimem CLI", 1)[1].split("\n## ", 1)[0]
    assert f"aimem {verb.split()[0]}" in cli_section or f"| {verb.split()[0]}" in cli_section, verb


def test_handoffs_help_names_expire_all() -> None:
    r = CliRunner().invoke(build_app(), ["handoffs", "--help"], env={"COLUMNS": "200"})
    assert "--expire-all" in r.output and "--older-than-days" in r.output


@pytest.mark.parametrize("extra", [(), ("--confirm",), ("--forget-tombstone",)])
@pytest.mark.parametrize("sid", ["", "   "])
def test_purge_session_refuses_a_blank_session_id_before_asking_the_server(extra, sid, fake_ingress) -> None:
    r = CliRunner().invoke(build_app(), ["purge-session", "-w", "w", "-p", "proj", "--session-id", sid, *extra,
                                         "--server", fake_ingress.url])
    assert r.exit_code == 1 and "--session-id is empty" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and fake_ingress.requests == []


@pytest.mark.parametrize("text", ["", "   "])
def test_profile_add_refuses_an_empty_preference_before_asking_the_server(text: str) -> None:
    r = CliRunner().invoke(build_app(), ["profile", "add", text, "--server", "http://127.0.0.1:9"])
    assert r.exit_code == 1 and "the preference is empty" in r.output, r.output
