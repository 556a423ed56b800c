"""OMP (Oh My Pi) sessions: ``~/.omp/agent/sessions/--<cwd>--/<time>_<session id>.jsonl``.

OMP is a fork of Pi and keeps Pi's session format (``aimem_cli.transcripts.pi`` documents
the mapping) in its own agent directory. Keys are ``omp:<session id>:<entry id>:<n>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from aimem_cli.transcripts.base import glob_under
from aimem_cli.transcripts.pi import make_read

CLIENT = "omp"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.omp/agent/sessions/*/*.jsonl``."""
    yield from glob_under(home / ".omp" / "agent" / "sessions", "*/*.jsonl")


read = make_read(CLIENT)
