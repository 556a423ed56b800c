"""``aimem profile`` is the admin API's: its help says so, and a user's key gets one line
saying where a user reaches their own profile (a stand-in server answering 403 on loopback)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app


@pytest.fixture
def forbidding(json_server):
    deny = {"error": {"code": "forbidden", "message": "the admin API needs a root credential"}}
    with json_server(lambda method, path, body: (403, deny)) as s:
        yield s.url


def test_profile_help_says_it_needs_a_root_credential() -> None:
    r = CliRunner().invoke(build_app(), ["profile", "--help"], env={"COLUMNS": "300"})
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "need a root credential" in text and "memory_profile MCP tool" in text and "Yours" not in text


@pytest.mark.parametrize("verb", [["list"], ["add", "prefer tabs"], ["remove", "3"]])
def test_a_user_key_is_told_where_its_own_profile_is(verb, forbidding) -> None:
    r = CliRunner().invoke(build_app(), ["profile", *verb, "--server", forbidding, "--token", "aim_user"])
    assert r.exit_code == 1
    assert r.output.strip() == ("aimem: aimem profile needs a root credential (HTTP 403); a user manages their own "
                                "profile with the memory_profile MCP tool or on the web (/web/profile)"), r.output


@pytest.fixture
def purge_preview(json_server):
    def answer(method, path, body):
        return 200, {"dry_run": body.get("dry_run", False), "observations_deleted": 4, "handoffs_deleted": 1,
                     "pages_deleted": 2, "sessions_deleted": 1, "profile_entries_deleted": 2}

    with json_server(answer) as s:
        yield s.url


@pytest.mark.parametrize("verb", [["purge-session", "--session-id", "s1"], ["purge-project"]])
@pytest.mark.parametrize("confirm", [False, True])
def test_purge_previews_and_results_count_the_profile_entries_forgotten(verb, confirm, purge_preview) -> None:
    r = CliRunner().invoke(build_app(), [*verb, "-w", "w", "-p", "proj", "--server", purge_preview, "--token", "t",
                                         *(["--confirm"] if confirm else [])])
    assert r.exit_code == (0 if confirm else 1), r.output
    assert "Plus 2 profile entries stated there, forgotten for every project" in r.output
