"""Whether a hook event may be captured (stdlib only: the hook client runs it on every event).

The marker's ``capture`` switch and ``exclude`` globs (``aimem_cli.identity``) are held
against the files the event names. The hook client asks before it sends or spools an event;
``aimem import`` asks the same of every transcript event, so an import records exactly what
the live hooks would have.
"""

from __future__ import annotations

from typing import Any

from aimem_cli.identity import Identity

# Keys whose string values name a file in tool inputs/outputs of every client we read.
FILE_KEYS = frozenset(("file_path", "filePath", "path", "notebook_path", "target_file", "absolute_path",
                       "file", "filename", "paths", "files"))
_PATCH_FILE = "*** "  # apply_patch: "*** Update File: src/x.py"
MAX_PATH_SCAN = 256  # paths collected from one event at most
MAX_LIST_SCAN = 64  # entries of one list looked into


def capture_allowed(ident: Identity, payload: dict[str, Any]) -> bool:
    """False when the marker says ``capture = false`` or a file the event names is excluded."""
    if not ident.capture:
        return False
    if not ident.exclude:
        return True
    return all(ident.should_capture(p) for p in event_paths(payload))


def event_paths(value: Any, key: str = "", depth: int = 0, out: list[str] | None = None) -> list[str]:
    """File paths an event names: values under ``FILE_KEYS`` and ``apply_patch`` file headers."""
    out = [] if out is None else out
    if depth > 8 or len(out) >= MAX_PATH_SCAN:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            event_paths(v, str(k), depth + 1, out)
    elif isinstance(value, list):
        for v in value[:MAX_LIST_SCAN]:
            event_paths(v, key, depth + 1, out)
    elif isinstance(value, str):
        if key in FILE_KEYS and value and "\n" not in value:
            out.append(value)
        elif _PATCH_FILE in value and " File: " in value:
            for line in value.splitlines():
                if line.startswith(_PATCH_FILE) and " File: " in line:
                    out.append(line.split(" File: ", 1)[1].strip())
    return out
