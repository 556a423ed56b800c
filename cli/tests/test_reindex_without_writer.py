"""`aimem reindex` runs the writer's rebuild as a child process; without the writer package
installed it says so in one line and exits 1 (the CLI never imports a service)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run the CLI with aimem_writer hidden, as on a machine with only aimem-cli installed.
HIDDEN_WRITER = (
    "import sys; sys.modules['aimem_writer'] = None; from aimem_cli.main import main; "
    "sys.argv = ['aimem', 'reindex', '--data-dir', sys.argv[1]]; main()"
)


def test_reindex_names_the_missing_writer_package(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", HIDDEN_WRITER, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == "aimem: reindex needs the aimem-writer package installed (it runs the writer's rebuild)"
    assert not (tmp_path / "db").exists()
