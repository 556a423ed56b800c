"""Readers of each agent CLI's own transcripts (stdlib only), for ``aimem import``.

``READERS[client]`` is the module with ``discover(home)`` (where that client keeps its
transcripts) and ``read(path, state, stats)`` (the events after the saved state); see
``base`` for the event shape, the keys and the incremental state. A reader whose unit is
not an append-only file (a directory of JSON files, a database) sets ``ALWAYS_READ``: the
importer then reads it on every run instead of skipping it when its size is unchanged.
Antigravity keeps its conversations in an undocumented binary form and has no reader.
"""

from __future__ import annotations

from types import ModuleType

from aimem_cli.transcripts import claude_code, codex, copilot, crush, gemini, omp, opencode, openclaw, pi

READERS: dict[str, ModuleType] = {
    "claude-code": claude_code, "codex": codex, "gemini-cli": gemini, "opencode": opencode,
    "copilot-cli": copilot, "pi": pi, "omp": omp, "openclaw": openclaw, "crush": crush,
}
