"""The suite runs away from the folder it was started in, the user's home and ``AIMEM_*``
settings (the root ``conftest.isolated_environment``), so ``make up`` then ``make test``
passes: ``make up`` leaves ``./data`` with its own root token in the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_working_directory_is_an_empty_folder_outside_the_repository() -> None:
    cwd = Path.cwd().resolve()
    assert REPO not in (cwd, *cwd.parents)
    assert not (cwd / "data").exists()


def test_home_and_aimem_settings_are_the_tests_own() -> None:
    home = Path(os.environ["HOME"])
    assert Path.home() == home and not (home / ".local" / "share" / "aimem").exists()
    settings = [n for n in os.environ if n.startswith("AIMEM_") and n != "AIMEM_AGENTS_CACHE"
                and not n.startswith(("AIMEM_TEST_", "AIMEM_FUZZ_", "AIMEM_MODEL_"))]
    assert settings == []
    assert "XDG_DATA_HOME" not in os.environ


def test_a_child_process_sees_the_same_isolation() -> None:
    out = subprocess.run([sys.executable, "-c", "import os, pathlib; print(os.getcwd()); print(pathlib.Path.home())"],
                         capture_output=True, text=True, check=True, timeout=30)
    cwd, home = out.stdout.split()
    assert Path(cwd).resolve() == Path.cwd().resolve() and home == os.environ["HOME"]
