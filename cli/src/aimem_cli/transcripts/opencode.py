"""OpenCode sessions: ``~/.local/share/opencode/storage/`` (``$XDG_DATA_HOME/opencode``).

OpenCode keeps one JSON file per object (its ``Storage`` layout): ``session/<project
id>/<session id>.json`` (``id``, ``directory``, ``time``), ``message/<session
id>/<message id>.json`` (``id``, ``role``, ``time.created``, ``modelID``) and
``part/<message id>/<part id>.json`` (``type`` ``text`` with ``text``, ``tool`` with
``tool``, ``callID`` and ``state`` {``status``, ``input``, ``output``, ``error``},
``compaction``). A session file is the unit read; messages already read are remembered in
the state (their ids sort by creation), keys are ``opencode:<session id>:<part id>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from aimem_cli.transcripts.base import PROMPT_CHARS, Event, FileState, ReadStats, bound, event, glob_under

CLIENT = "opencode"
ALWAYS_READ = True  # the session file stays put while its messages and parts are added beside it


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.local/share/opencode/storage/session``; ``aimem import`` names it when missing)."""
    return home / ".local" / "share" / "opencode" / "storage" / "session"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.local/share/opencode/storage/session/*/*.json``."""
    yield from glob_under(root(home), "*/*.json")


def _load(path: Path, stats: ReadStats) -> dict[str, Any] | None:
    stats.lines += 1
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        stats.bad(why=f"not readable JSON: {exc}")
        return None
    return doc if isinstance(doc, dict) else None


def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
    """Yield events of the session's messages newer than ``state.ctx["last"]`` (a message id)."""
    info = _load(path, stats)
    if info is None or not isinstance(info.get("id"), str):
        return
    sid, cwd = info["id"], info.get("directory") if isinstance(info.get("directory"), str) else None
    storage = path.parents[2]
    last = state.ctx.get("last", "")
    for msg_path in sorted((storage / "message" / sid).glob("*.json")):
        if msg_path.stem <= last:
            continue
        msg = _load(msg_path, stats)
        if msg is None:
            continue
        ts = (msg.get("time") or {}).get("created") if isinstance(msg.get("time"), dict) else None
        texts: list[str] = []
        for part_path in sorted((storage / "part" / msg_path.stem).glob("*.json")):
            part = _load(part_path, stats)
            if part is None:
                continue
            key = f"{CLIENT}:{sid}:{part_path.stem}"
            if part.get("type") == "text" and isinstance(part.get("text"), str) and not part.get("synthetic"):
                texts.append(part["text"])
            elif part.get("type") == "tool" and isinstance(part.get("state"), dict):
                st = part["state"]
                if st.get("status") in ("completed", "error"):
                    out = st.get("output") if st.get("status") == "completed" else f"Error: {st.get('error')}"
                    yield event(key, "post-tool-use", sid, cwd, ts, tool_name=str(part.get("tool") or "tool"),
                                tool_input=st.get("input"), tool_response=bound(out))
        text = "\n".join(t for t in texts if t.strip())
        if text:
            kind, field = ("user-prompt", "prompt") if msg.get("role") == "user" else ("stop", "message")
            yield event(f"{CLIENT}:{sid}:{msg_path.stem}", kind, sid, cwd, ts, **{field: bound(text, PROMPT_CHARS)})
        state.ctx["last"] = msg_path.stem
    state.offset = path.stat().st_size
