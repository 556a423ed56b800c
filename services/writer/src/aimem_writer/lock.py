"""The writer's liveness lock: ``<data_dir>/db/writer.lock`` held with ``flock`` while it runs.

Direct-disk lifecycle ops (``aimem reindex``, restore, reset) call ``writer_alive`` and
refuse while a writer holds it (DESIGN.md invariant 9). The kernel drops the lock when the
process dies, even on ``kill -9``, so a stale file never blocks anything.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from aimem_common.errors import ConflictError

LOCK_NAME = "writer.lock"


def lock_path(data_dir: Path) -> Path:
    return Path(data_dir) / "db" / LOCK_NAME


class WriterLock:
    """An exclusive, non-blocking ``flock``; ``acquire()`` raises when another writer has it."""

    def __init__(self, data_dir: Path):
        self.path = lock_path(data_dir)
        self._fd: int | None = None

    def acquire(self) -> "WriterLock":
        """Take the lock.

        Raises:
            ConflictError: code ``writer_alive`` — another process holds it.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            holder = ""
            try:
                holder = os.pread(fd, 32, 0).decode().strip()
            except OSError:
                pass
            os.close(fd)
            raise ConflictError(
                f"another aimem writer is alive (pid {holder or '?'}); stop it first", code="writer_alive"
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def writer_alive(data_dir: Path) -> bool:
    """Return True when a live process holds the writer lock of ``data_dir``."""
    try:
        lock = WriterLock(data_dir).acquire()
    except ConflictError:
        return True
    lock.release()
    return False
