"""Where each session of this client began.

The place a hook event keeps when its working directory is gone from disk (stdlib only: the
hook client's hot path imports it).

``remember_session`` notes a session's place when its start was resolved on disk;
``session_place`` gives it back to a later event from a missing directory. The file is
``<spool>/session-places.json``, the last ``MAX_SESSION_PLACES`` sessions, newest last.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aimem_cli.hookspool import Spool
from aimem_cli.identity import Identity
from aimem_common import clients, locations

_SESSION_KEYS = clients.SESSION_ID_KEYS
SESSION_PLACES = "session-places.json"  # in the spool directory: {session id: identity query}, newest last
MAX_SESSION_PLACES = 256


def session_id_of(payload: dict[str, Any]) -> str | None:
    return next((payload[k] for k in _SESSION_KEYS if isinstance(payload.get(k), str) and payload[k]), None)


def remember_session(spool: Spool, agent: str, payload: dict[str, Any], cwd: str | None,
                     ident: Identity | None = None) -> None:
    """Note the latest session of ``agent`` (for ``aimem finalize-session``) and, when its
    directory was resolved on disk, the place of the session (``session_place``); best effort."""
    sid = session_id_of(payload)
    if not sid:
        return
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else cwd
    try:
        (spool.dir / f"last-session.{agent}.json").write_text(json.dumps({"session_id": sid, "cwd": cwd}))
    except OSError:
        pass
    if ident is None or ident.source == "session" or not _on_disk(ident):
        return
    path = spool.dir / SESSION_PLACES
    places = _read_places(path)
    places.pop(sid, None)
    places[sid] = ident.as_query()
    while len(places) > MAX_SESSION_PLACES:
        places.pop(next(iter(places)))
    tmp = path.with_name(f"{SESSION_PLACES}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(places))
        os.replace(tmp, path)
    except OSError:
        pass


def session_place(spool: Spool, payload: dict[str, Any], ident: Identity | None) -> Identity | None:
    """The identity to send for an event whose working directory is gone from disk.

    A checkout renamed, moved or deleted under a running agent (or a session resumed with
    the directory it began in) leaves a ``cwd`` nothing can be looked up at: resolving it
    would name it by whatever lies above it (an ancestor marker, the last folder), not by
    the repository it was. Such an event keeps the place this client resolved for the
    session at its start (``remember_session``: the last ``MAX_SESSION_PLACES`` sessions),
    so it joins its session; the server then follows the repository id or origin to the
    checkout's project. The capture rules are still the ones found above the gone
    directory (they only ever record less). ``ident`` unchanged when the directory exists,
    is a Windows path seen here, or the session is not remembered.
    """
    if ident is None or _on_disk(ident):
        return ident
    sid = session_id_of(payload)
    q = _read_places(spool.dir / SESSION_PLACES).get(sid or "")
    if not isinstance(q, dict) or not isinstance(q.get("project"), str):
        return ident
    return Identity(project=q["project"], workspace=q.get("workspace"), explicit=q.get("named") == "1",
                    root=q.get("root"), origin=q.get("origin"), source="session", marker=ident.marker,
                    capture=ident.capture, exclude=ident.exclude, cwd=ident.cwd, repo_id=q.get("repo_id"))


def _on_disk(ident: Identity) -> bool:
    """True unless ``ident`` was resolved from a directory that does not exist here (a
    Windows agent's path seen on another system counts as found: it is never looked up)."""
    cwd = ident.cwd
    return not cwd or os.path.isdir(cwd) or (os.name != "nt" and locations.is_windows(cwd))


def _read_places(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
