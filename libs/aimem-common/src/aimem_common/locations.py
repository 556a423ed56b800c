"""The one location normaliser: how a working directory or repository root is compared and stored.

Stdlib only and import-light: the hook client (``aimem_cli.identity``) runs it on every
agent event, ingress on every hook, the writer on every handoff match. Every place that
compares or stores a location as identity (a project's root and root aliases, a handoff's
``root``/``cwd``, the project name derived from a cwd) goes through ``normalize``, so one
folder is one place however a client spells it.

Rules (``normalize``):

* ``\\`` and ``/`` are one separator; repeated separators, ``.`` and ``..`` segments and a
  trailing separator are folded (``C:\\Repo\\`` → ``c:/repo``, ``/w/app/`` → ``/w/app``);
* a Windows drive path (``C:``, ``c:\\``, ``C:/``, and the editors' URI form ``/c:/x``) or a UNC path (``\\\\server\\share``,
  ``//server/share``; the ``\\\\?\\`` and ``\\\\?\\UNC\\`` long-path prefixes are dropped) is
  a Windows location: Windows compares paths case-insensitively, so the whole location is
  lower-cased (the drive letter included). A drive root keeps its separator (``c:/``);
* a POSIX path keeps its case (Linux is case-sensitive; a case-insensitive macOS volume is
  not knowable from a string: the hook client's ``realpath`` is what makes two spellings of
  one checkout one root there);
* blank (empty or whitespace only) → ``None``; other whitespace is kept (a folder name may
  end in a space on POSIX); a relative path stays relative (normalised), it is never made absolute
  here (the server cannot know the client's cwd).

``name`` gives a location's last segment (the project name of a cwd outside any repository):
case kept for a POSIX path, lower-case for a Windows one (taken from ``normalize``);
``inside`` is the path-boundary test (``/repo`` holds ``/repo/sub``, never ``/repo-old``).
"""

from __future__ import annotations

import posixpath
import re

_DRIVE = re.compile(r"^([A-Za-z]):(?:/|$)")
_LONG_UNC = re.compile(r"^[\\/]{2}[?.][\\/]UNC[\\/]", re.I)
_LONG = re.compile(r"^[\\/]{2}[?.][\\/](?=[A-Za-z]:)")
_URI_DRIVE = re.compile(r"^/(?=[A-Za-z]:(?:/|$))")  # VS Code-style /c:/Users/... (Cursor's workspace_roots)


def _slashes(path: str) -> str:
    p = _LONG_UNC.sub("//", path)
    p = _LONG.sub("", p)
    return _URI_DRIVE.sub("", p.replace("\\", "/"))


def is_windows(path: str | None) -> bool:
    """True when ``path`` is a Windows drive path (``C:\\x``, ``c:/x``, ``C:``) or a UNC path."""
    if not path:
        return False
    p = _slashes(path)
    return bool(_DRIVE.match(p)) or (p.startswith("//") and not p.startswith("///") and len(p) > 2)


def normalize(path: str | None) -> str | None:
    """Return the canonical form of a location (see the module docstring), or ``None`` when blank.

    Idempotent: ``normalize(normalize(p)) == normalize(p)``. Pure string work (no I/O), so
    the server can apply it to a client's paths from any operating system.
    """
    if path is None or not path.strip():
        return None
    p = _slashes(path)
    m = _DRIVE.match(p)
    if m:
        rest = posixpath.normpath("/" + p[2:].lstrip("/"))  # '..' never climbs above the drive root
        return (m.group(1) + ":" + rest).lower()
    if p.startswith("//") and not p.startswith("///") and len(p) > 2:
        rest = posixpath.normpath("/" + p[2:].lstrip("/"))
        return ("/" + rest).lower() if rest != "/" else None
    out = posixpath.normpath(p)
    return None if out == "." else out


def name(path: str | None) -> str | None:
    """Return the last segment of a location: a POSIX folder's name with its case kept
    (``/home/me/MyApp/`` → ``MyApp``), a Windows location's from its normalised, lower-case form
    (``C:\\Users\\Me\\MyApp\\`` → ``myapp``), so that every spelling of one Windows folder
    names one project (a cwd outside any repository is found by this name, not by a root).

    ``None`` for a blank path or a root (``/``, ``C:\\``, ``\\\\server``).
    """
    if path is None or not path.strip():
        return None
    p = (normalize(path) if is_windows(path) else _slashes(path)) or ""
    p = p.rstrip("/")
    seg = p.rsplit("/", 1)[-1]
    if not seg or _DRIVE.match(seg + "/") or seg in (".", ".."):
        return None
    return seg


def inside(path: str | None, root: str | None) -> bool:
    """True when location ``path`` is ``root`` or below it on a path boundary (both normalised here)."""
    p, r = normalize(path), normalize(root)
    if not p or not r:
        return False
    return p == r or p.startswith(r.rstrip("/") + "/")


def same(a: str | None, b: str | None) -> bool:
    """True when two locations name one place (``C:\\Repo\\`` and ``c:/repo``); False when either is blank."""
    na, nb = normalize(a), normalize(b)
    return na is not None and na == nb


__all__ = ["inside", "is_windows", "name", "normalize", "same"]
