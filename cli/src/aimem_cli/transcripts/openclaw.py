"""OpenClaw sessions: ``~/.openclaw/agents/<agent id>/sessions/<session id>.jsonl``.

OpenClaw runs Pi's agent inside its gateway and writes each session's transcript in Pi's
session format (``aimem_cli.transcripts.pi`` documents the mapping), one folder per
configured agent (``main`` by default) beside a ``sessions.json`` index that is not a
transcript. The header's ``cwd`` is the agent's workspace. Keys are
``openclaw:<session id>:<entry id>:<n>``.

Recent releases (2026.9) move live transcripts into the per-agent SQLite database
(``agents/<agent id>/agent/openclaw-agent.sqlite``, partly zstd-compressed, with no
documented schema) and keep these JSONL files as migration sources and exports: those
database rows are not read here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from aimem_cli.transcripts.base import glob_under
from aimem_cli.transcripts.pi import make_read

CLIENT = "openclaw"


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.openclaw/agents``; ``aimem import`` names it when missing)."""
    return home / ".openclaw" / "agents"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.openclaw/agents/*/sessions/*.jsonl``."""
    yield from glob_under(root(home), "*/sessions/*.jsonl")


read = make_read(CLIENT)
