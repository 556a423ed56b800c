"""Shared pieces of the installers: plans, diffs, atomic writes, our command line."""

from __future__ import annotations

import base64
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


def apply(changes: list[FileChange], ledger: "Ledger | None" = None) -> list[Path]:
    """Write every changed file atomically (tmp + fsync + rename); return the paths touched.

    A file keeps its mode (a new one gets the umask's); one carrying a credential
    (``FileChange.secret``) is made 0600.
    With ``ledger``, the first change aimem makes to a user's file records its original bytes
    and mode, and a later change that leaves nothing of aimem's in it (``Ledger.restoring``)
    puts those original bytes and mode back instead of re-serialising the document; folders
    created for a new file are recorded and removed again when its deletion leaves them empty.
    """
    touched = []
    removing = False  # an uninstall step: the token files may have lost their last user
    for ch in changes:
        if not ch.changed:
            continue
        back = ledger.restoring(ch) if ledger else None
        if back is not None:
            _write(ch.path, back[0], back[1])
            ledger.forget(ch.path)
            removing = True
        elif ch.new is None:
            ch.path.unlink(missing_ok=True)
            removing = True
            if ledger:
                ledger.forget(ch.path)
        else:
            if ledger:
                ledger.before_write(ch.path)
            mode = 0o600 if ch.secret else (ch.path.stat().st_mode & 0o7777 if ch.path.exists() else None)
            _write(ch.path, ch.new.encode("utf-8"), mode)
            if ledger and ledger.files.get(str(ch.path), {}).get("original") is not None and "aimem" not in ch.new:
                ledger.forget(ch.path)  # edited by the user since, and nothing of aimem's left: theirs now
                removing = True
            elif ledger:
                ledger.written(ch.path, ch.new)
        touched.append(ch.path)
    if ledger:
        ledger.save(removing)
    return touched


def _write(path: Path, data: bytes, mode: int | None) -> None:
    """Replace ``path`` with ``data`` atomically (tmp + fsync + rename); ``mode`` None: the
    umask's default for a new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


LEDGER = Path("installers") / "originals.json"  # under the hook client's data dir


class Ledger:
    """What aimem's installers changed on this machine, so that uninstalling gives the user's
    files back byte for byte (content and mode) and takes away what aimem created.

    Kept at ``<client data dir>/installers/originals.json`` (mode 0600: the originals may hold
    the user's own secrets), as ``{"files": {path: {"original": base64 | null, "mode": int,
    "written": text}}, "dirs": [folder, ...]}``: ``original`` null for a file aimem created,
    ``written`` the last text aimem wrote there, ``dirs`` the folders aimem created. When the
    only files left are the hook client's token files (``auth/client-token``) and each still
    holds what aimem wrote, the last client using them is gone: they are deleted, then the
    ledger, then every recorded folder left empty.

    Raises:
        InstallError: the ledger file exists and is not readable JSON.
    """

    def __init__(self, path: Path):
        self.path = path
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as exc:
            raise InstallError(f"{path}: unreadable ({exc}); move it away to install without it") from None
        if not isinstance(data, dict):
            raise InstallError(f"{path}: expected a JSON object; move it away to install without it")
        self.files: dict[str, dict[str, Any]] = data.get("files") if isinstance(data.get("files"), dict) else {}
        self.dirs: list[str] = [d for d in data.get("dirs", []) if isinstance(d, str)]

    def before_write(self, path: Path) -> None:
        """Record ``path``'s original bytes and mode (or that it did not exist, and which of
        its folders are missing) unless an earlier write already did."""
        key = str(path)
        if key in self.files:
            return
        if path.exists():
            self.files[key] = {"original": base64.b64encode(path.read_bytes()).decode(),
                               "mode": path.stat().st_mode & 0o7777}
        else:
            self.files[key] = {"original": None}
            self._note_missing_dirs(path.parent)

    def written(self, path: Path, text: str) -> None:
        self.files.setdefault(str(path), {"original": None})["written"] = text

    def forget(self, path: Path) -> None:
        self.files.pop(str(path), None)

    def restoring(self, ch: FileChange) -> tuple[bytes, int] | None:
        """``(original bytes, mode)`` when ``ch`` leaves nothing of aimem's in a file that
        existed before aimem first wrote it, else None (the change is written as planned).

        Nothing of aimem's is left when the planned text is the original text, or when the
        planned JSON document minus what aimem added (keys the original lacks holding an
        empty object or list, or the scalar aimem wrote, e.g. OpenCode's ``$schema``) is the
        original document. A planned deletion of such a file always restores it (a plan
        deletes a file only when nothing but aimem's entries is left). An original that
        mentions aimem is never restored (it held aimem's entries of an earlier install)."""
        rec = self.files.get(str(ch.path))
        if not rec or rec.get("original") is None:
            return None
        raw = base64.b64decode(rec["original"])
        back = raw, int(rec.get("mode", 0o644))
        if b"aimem" in raw:
            return None  # the original held aimem's own entries (an install older than the ledger)
        if ch.new is None:
            return back
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if ch.new == text:
            return back
        try:
            orig = json.loads(text) if text.strip() else {}
            new = json.loads(ch.new)
            written = json.loads(rec["written"]) if rec.get("written") else {}
        except ValueError:
            return None
        return back if _without_additions(new, orig, written) == orig else None

    def save(self, removing: bool = False) -> None:
        """Write the ledger (0600). After a removal (``removing``) that left aimem nothing
        here but the token files, delete them, the ledger and the folders aimem created that
        are left empty (an install that only writes a token keeps it)."""
        for key in [k for k, rec in self.files.items() if not Path(k).exists()]:
            del self.files[key]  # gone meanwhile (removed by hand): nothing to give back
        tokens = [k for k in self.files if Path(k).parts[-2:] == ("auth", "client-token")]
        if removing and len(tokens) == len(self.files):
            for key in tokens:
                rec, path = self.files[key], Path(key)
                if rec.get("original") is None and read_text(path) == rec.get("written"):
                    path.unlink(missing_ok=True)
                    del self.files[key]
        if self.files:
            self._note_missing_dirs(self.path.parent)
            body = json.dumps({"files": self.files, "dirs": self.dirs}, indent=1).encode("utf-8")
            _write(self.path, body, 0o600)
            return
        self.path.unlink(missing_ok=True)
        for folder in sorted(self.dirs, key=lambda d: len(Path(d).parts), reverse=True):
            try:
                Path(folder).rmdir()  # only an empty folder goes
            except OSError:
                pass
        self.dirs = []

    def _note_missing_dirs(self, folder: Path) -> None:
        while not folder.exists() and folder != folder.parent:
            if str(folder) not in self.dirs:
                self.dirs.append(str(folder))
            folder = folder.parent


def _without_additions(new: Any, orig: Any, written: Any) -> Any:
    """``new`` without aimem's leftovers: at every level, the keys ``orig`` lacks whose value
    is an empty object or list, or the scalar aimem wrote at that place (``written``)."""
    if not (isinstance(new, dict) and isinstance(orig, dict)):
        return new
    out = {}
    for key, value in new.items():
        was = written.get(key) if isinstance(written, dict) else None
        if key in orig:
            out[key] = _without_additions(value, orig[key], was)
        elif value in ({}, []) or (not isinstance(value, (dict, list)) and isinstance(written, dict)
                                    and key in written and was == value):
            continue
        else:
            out[key] = value
    return out


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
