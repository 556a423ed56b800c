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


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.omp/agent/sessions``; ``aimem import`` names it when missing)."""
    return home / ".omp" / "agent" / "sessions"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.omp/agent/sessions/*/*.jsonl``."""
    yield from glob_under(root(home), "*/*.jsonl")


read = make_read(CLIENT)
