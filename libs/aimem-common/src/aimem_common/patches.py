"""Which files a patch tool changes: Codex ``apply_patch`` envelopes and unified diffs.

Codex passes its patch as text (``tool_input.command`` of an ``apply_patch`` call, or a
shell command ``apply_patch <<'EOF' ... EOF``); other clients run ``git apply``/``patch``
with a unified diff. Both name the files they touch on marker lines, which is all the
session page and a hook title need: no patch is applied or validated here.
"""

from __future__ import annotations

import re

MAX_FILES = 50

# `*** Add File: p`, `*** Update File: p`, `*** Delete File: p`, `*** Move to: p` (Codex
# apply_patch grammar); `+++ b/p` / `--- a/p` (unified diff, `/dev/null` for created files).
_ENVELOPE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_UNIFIED = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(.+?)(?:\t.*)?\s*$", re.MULTILINE)
_PATCH_TOOLS = frozenset({"apply_patch", "applypatch", "patch"})


def looks_like_patch(text: str) -> bool:
    """True when ``text`` carries an ``apply_patch`` envelope or a unified diff header."""
    return "*** Begin Patch" in text or bool(re.search(r"^\+\+\+ ", text, re.MULTILINE))


def patch_files(text: str) -> list[str]:
    """Return the paths a patch text changes, in order of first mention, without repeats.

    Args:
        text: An ``apply_patch`` envelope (possibly inside a shell heredoc) or a unified
            diff; anything else yields ``[]``.

    Returns:
        ``list[str]`` of the paths as written in the patch (relative or absolute), at most
        ``MAX_FILES``; ``/dev/null`` is skipped.
    """
    if not isinstance(text, str) or not looks_like_patch(text):
        return []
    found: list[str] = []
    if "*** Begin Patch" in text:
        for m in _ENVELOPE.finditer(text):
            path = m.group(2) or m.group(3)
            if path and path not in found:
                found.append(path)
    else:
        for m in _UNIFIED.finditer(text):
            path = m.group(1)
            if path and path != "/dev/null" and path not in found:
                found.append(path)
    return found[:MAX_FILES]


def is_patch_tool(tool_name: str | None) -> bool:
    """True for tool names whose input is a patch text (Codex ``apply_patch``)."""
    return (tool_name or "").casefold() in _PATCH_TOOLS


__all__ = ["MAX_FILES", "is_patch_tool", "looks_like_patch", "patch_files"]
