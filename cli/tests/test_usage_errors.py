"""A wrong ``aimem`` invocation is one line on stderr and exit 2, for every command (the
entry point handles it once); ``--help`` keeps typer's help. Run as the real ``aimem`` script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

AIMEM = Path(sys.executable).with_name("aimem")


def aimem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env["AIMEM_DATA_DIR"] = str(cwd / "data")  # no stack here: nothing may be reached anyway
    return subprocess.run([str(AIMEM), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "line"), [
    (["search", "x", "-p", "api", "--limit", "abc"],
     "aimem: Invalid value for '--limit': Input should be a valid integer, unable to parse string as an integer "
     "(see aimem search --help)"),
    (["checkpoints", "--limit", "0"],
     "aimem: Invalid value for '--limit': Input should be greater than or equal to 1 (see aimem checkpoints --help)"),
    (["api-key", "revoke", "abc"],
     "aimem: Invalid value for 'key_id': Input should be a valid integer, unable to parse string as an integer "
     "(see aimem api-key revoke --help)"),
    (["recent", "--limit", "999999999"],
     "aimem: Invalid value for '--limit': Input should be less than or equal to 500 (see aimem recent --help)"),
    (["handoffs", "--expire-all", "--older-than-days", "-5", "--confirm"],
     "aimem: Invalid value for '--older-than-days': Input should be greater than or equal to 0 "
     "(see aimem handoffs --help)"),
    (["nosuchcmd"], "aimem: No such command 'nosuchcmd' (see aimem --help)"),
    (["search", "x", "--nosuch"], "aimem: No such option: --nosuch (see aimem search --help)"),
    (["search"], "aimem: Missing argument 'query' (see aimem search --help)"),
])
def test_a_wrong_invocation_is_one_line_and_exit_2(tmp_path, args, line):
    res = aimem(*args, cwd=tmp_path)
    assert (res.returncode, res.stderr, res.stdout) == (2, line + "\n", "")


def test_help_is_still_typers_help(tmp_path):
    res = aimem("search", "--help", cwd=tmp_path)
    assert res.returncode == 0 and "Usage: aimem search [OPTIONS]" in res.stdout and "--limit" in res.stdout
    res = aimem("--help", cwd=tmp_path)
    assert res.returncode == 0 and "api-key" in res.stdout and "search" in res.stdout
