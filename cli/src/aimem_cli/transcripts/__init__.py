"""Readers of each agent CLI's own transcripts (stdlib only), for ``aimem import``.

``READERS[client]`` is the module with ``discover(home)`` (where that client keeps its
transcripts) and ``read(path, state, stats)`` (the events after the saved state); see
``base`` for the event shape, the keys and the incremental state.
"""

from __future__ import annotations

from types import ModuleType

from aimem_cli.transcripts import claude_code, codex, copilot, gemini, opencode

READERS: dict[str, ModuleType] = {
    "claude-code": claude_code, "codex": codex, "gemini-cli": gemini, "opencode": opencode,
    "copilot-cli": copilot,
}
