"""Line diffs for the history, conflict and pending-write screens (stdlib ``difflib``)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

MAX_DIFF_LINES = 4000


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a unified diff: ``kind`` is ``add``, ``del``, ``hunk`` or ``ctx``."""

    kind: str
    text: str


def unified(old: str, new: str, *, old_name: str = "before", new_name: str = "after",
            context: int = 3) -> list[DiffLine]:
    """Return the unified diff of two texts as typed lines (≤ ``MAX_DIFF_LINES``); [] if equal."""
    out: list[DiffLine] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=context,
                                     lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        out.append(DiffLine(kind, line))
        if len(out) >= MAX_DIFF_LINES:
            out.append(DiffLine("hunk", f"... diff cut at {MAX_DIFF_LINES} lines"))
            break
    return out
