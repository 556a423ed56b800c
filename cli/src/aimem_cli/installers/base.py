"""Shared pieces of the installers: plans, diffs, atomic writes, our command line."""

from __future__ import annotations

import difflib
import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OURS_MARK = " hook --agent "  # every command we install contains it, after the aimem binary


class InstallError(Exception):
    """A settings file cannot be merged safely (unparsable, unexpected shape)."""


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file an installer wants to change: ``new is None`` means delete the file."""

    path: Path
    old: str | None
    new: str | None
    secret: str | None = None  # a credential in ``new``: written mode 0600, masked in diffs

    @property
    def changed(self) -> bool:
        return self.old != self.new


def aimem_binary() -> str:
    """Return the absolute path of the ``aimem`` script beside this interpreter, else ``aimem``."""
    candidate = Path(sys.executable).with_name("aimem")
    return str(candidate) if candidate.exists() else "aimem"


def hook_command(agent: str, event: str, binary: str | None = None, ingress_url: str | None = None) -> str:
    """Return the shell command a client runs for ``event``: ``<aimem> hook --agent A --event E``,
    plus ``--ingress-url U`` for a stack that is not on the default port (the hook client
    would otherwise post to 8701)."""
    cmd = f"{shlex.quote(binary or aimem_binary())} hook --agent {agent} --event {shlex.quote(event)}"
    return cmd + (f" --ingress-url {shlex.quote(ingress_url)}" if ingress_url else "")


def is_ours(command: Any) -> bool:
    """True for a command string that runs ``aimem hook`` (any binary path, any event)."""
    return isinstance(command, str) and OURS_MARK in command and "aimem" in command


def read_text(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    """Parse a JSON settings file (absent or blank = ``{}``).

    Raises:
        InstallError: not JSON (JSONC comments included) or not an object.
    """
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InstallError(f"{path}: not plain JSON ({exc}); merge the aimem entries by hand") from None
    if not isinstance(doc, dict):
        raise InstallError(f"{path}: expected a JSON object at the top level")
    return doc


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def json_change(path: Path, text: str | None, doc: dict[str, Any], *, delete_if_empty: bool = False) -> FileChange:
    """Build the change from ``text`` to ``doc``; an untouched document stays byte-identical."""
    if text is not None and text.strip() and load_json(path, text) == doc:
        return FileChange(path, text, text)
    if not doc and delete_if_empty:
        return FileChange(path, text, None)
    if not doc and text is None:
        return FileChange(path, None, None)
    return FileChange(path, text, dump_json(doc))


def diff(changes: list[FileChange]) -> str:
    """Render the changes as one unified diff (empty string when nothing changes)."""
    out: list[str] = []
    for ch in changes:
        if not ch.changed:
            continue
        old = (ch.old or "").splitlines(keepends=True)
        new = (ch.new or "").splitlines(keepends=True)
        a = str(ch.path) if ch.old is not None else "/dev/null"
        b = str(ch.path) if ch.new is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, a, b)
        out.extend(line.replace(ch.secret, "<token>") if ch.secret else line for line in lines)
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def apply(changes: list[FileChange]) -> list[Path]:
    """Write every changed file atomically (tmp + fsync + rename); return the paths touched.

    A file keeps its mode; one carrying a credential (``FileChange.secret``) is made 0600."""
    touched = []
    for ch in changes:
        if not ch.changed:
            continue
        if ch.new is None:
            ch.path.unlink(missing_ok=True)
        else:
            ch.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{ch.path.name}.", dir=ch.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(ch.new)
                    fh.flush()
                    os.fsync(fh.fileno())
                if ch.secret:  # a credential: owner only, whatever the file's mode was
                    os.chmod(tmp, 0o600)
                elif ch.path.exists():
                    os.chmod(tmp, ch.path.stat().st_mode & 0o777)
                os.replace(tmp, ch.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        touched.append(ch.path)
    return touched


def nested_table(path: Path, doc: dict[str, Any], keys: tuple[str, ...], *, create: bool) -> dict[str, Any] | None:
    """The object at ``doc[keys[0]][keys[1]]...`` (made on the way with ``create``; else None
    when a level is missing).

    Raises:
        InstallError: a level exists and is not an object (the user's file is not what the
            client documents: never overwritten).
    """
    node: Any = doc
    for depth, key in enumerate(keys):
        child = node.get(key)
        if child is None:
            if not create:
                return None
            child = node[key] = {}
        if not isinstance(child, dict):
            raise InstallError(f"{path}: `{'.'.join(keys[:depth + 1])}` is not an object")
        node = child
    return node


def prune_empty(doc: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Drop the objects along ``keys`` that are left empty, innermost first (what an install
    created around its one entry goes with it)."""
    for depth in range(len(keys), 0, -1):
        parent = doc
        for key in keys[:depth - 1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and parent.get(keys[depth - 1]) == {}:
            del parent[keys[depth - 1]]
