"""What a running ``aimem up`` leaves in its data dir, and how a new start cleans up after a dead one.

* ``<data_dir>/run/up.json`` (0600): the supervisor's pid and what it runs on (port base,
  NATS URL). ``config.load`` reads it (``running_overrides``) so that every client of that
  data dir (the CLI's NATS verbs, the installers) finds the stack where it really is, even
  when ``aimem up`` was given ``--port-base``/``--nats-port`` on its command line. A record
  whose supervisor is gone is ignored.
* pid files of the servers the supervisor starts (``<data_dir>/nats.pid``,
  ``<data_dir>/db/litestream.pid``): a start that finds one whose process still runs, is
  really that server of this data dir (its command line says so) and whose supervisor is
  gone, stops it (``stop_stale``); one still owned by a live ``aimem up`` is an error that
  says which process to stop.

Linux ``/proc`` only; elsewhere nothing is found and nothing is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

RECORD = Path("run") / "up.json"
# Environment variable naming one ``aimem up`` run (a random id); every service it starts
# reports it on ``/healthz`` as ``instance`` so the supervisor can tell its own services from
# another stack answering on the same ports.
UP_INSTANCE_ENV = "AIMEM_UP_INSTANCE"


def cmdline(pid: int) -> list[str] | None:
    """Return the command line of ``pid`` (None when it is gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a] or None


def parent_pid(pid: int) -> int | None:
    """Return the parent pid of ``pid`` (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def is_supervisor(pid: int) -> bool:
    """True when ``pid`` runs ``aimem up`` (the console script or ``python -m aimem_cli``)."""
    args = cmdline(pid) or []
    for i, arg in enumerate(args):
        if Path(arg).name == "aimem" or arg == "aimem_cli":
            return "up" in args[i + 1:]
    return False


def write_record(data_dir: Path, **fields: Any) -> Path:
    """Write ``<data_dir>/run/up.json`` for this process (mode 0600, atomic); return its path."""
    path = Path(data_dir) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".up.json.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"pid": os.getpid(), **fields}, fh)
    os.replace(tmp, path)
    return path


def remove_record(data_dir: Path) -> None:
    """Remove ``<data_dir>/run/up.json`` when it is this process's."""
    path = Path(data_dir) / RECORD
    try:
        if json.loads(path.read_text("utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def read_record(data_dir: Path) -> dict[str, Any] | None:
    """Return the record of the ``aimem up`` running on ``data_dir``, None when there is none
    (no file, or its supervisor is gone)."""
    try:
        rec = json.loads((Path(data_dir) / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int) or not is_supervisor(rec["pid"]):
        return None
    return rec


def running_overrides(data_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """The settings a running ``aimem up`` of ``data_dir`` decided on its command line
    (``port_base``, ``bus.nats_url``), except those ``env`` sets explicitly."""
    rec = read_record(data_dir)
    if rec is None:
        return {}
    out: dict[str, Any] = {}
    if isinstance(rec.get("port_base"), int) and "AIMEM_PORT_BASE" not in env:
        out["port_base"] = rec["port_base"]
    if isinstance(rec.get("nats_url"), str) and rec["nats_url"] and "AIMEM_BUS__NATS_URL" not in env:
        out["bus"] = {"nats_url": rec["nats_url"]}
    return out


def read_pid(pid_file: Path) -> int | None:
    """Return the pid written in ``pid_file`` (None when absent or not a number)."""
    try:
        return int(Path(pid_file).read_text().strip())
    except (OSError, ValueError):
        return None


def stop_stale(pid_file: Path, marks: list[str], what: str, *, timeout_s: float = 5.0) -> str | None:
    """Stop the process of ``pid_file`` left behind by a dead supervisor; return what was done.

    The process is ours only when its command line holds every string of ``marks`` (its
    binary name and this data dir's path): a reused pid is never touched, the pid file is
    just removed. Returns None when nothing was there.

    Raises:
        RuntimeError: it is still run by a live ``aimem up`` (the message names both pids).
    """
    pid = read_pid(pid_file)
    if pid is None:
        return None
    args = cmdline(pid)
    text = " ".join(args or [])
    if args is None or not all(m in text for m in marks):
        Path(pid_file).unlink(missing_ok=True)
        return None
    parent = parent_pid(pid)
    if parent and parent != 1 and is_supervisor(parent):
        raise RuntimeError(f"{what} (pid {pid}) of this data dir is run by another aimem up (pid {parent}): "
                           f"stop that one first (Ctrl-C in its terminal, or kill {parent})")
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while cmdline(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if cmdline(pid) is not None:
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
    except ProcessLookupError:
        pass
    except PermissionError:
        raise RuntimeError(f"a stale {what} (pid {pid}) of this data dir belongs to another user: "
                           f"ask them or root to stop it (kill {pid})") from None
    if cmdline(pid) is not None:
        raise RuntimeError(f"a stale {what} (pid {pid}) of this data dir does not stop: kill -9 {pid}")
    Path(pid_file).unlink(missing_ok=True)
    return f"stopped a stale {what} (pid {pid}) left by an earlier aimem up of this data dir"
