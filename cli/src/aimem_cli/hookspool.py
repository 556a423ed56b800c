"""The hook client's local spool: JSONL, one entry per hook event, stdlib only.

Layout under ``<data_dir>/spool/``:

* ``hooks.jsonl`` — lines ``{"k": key, "ts": epoch_s, "agent", "event", "ext", "cwd",
  "p": payload}`` (an event to deliver), ``{"done": key}`` (delivered or refused for good) or
  ``{"why": key, "status": int|null, "at": epoch_s}`` (the last answer that kept it here:
  a 401 after a key was revoked, a 403, a 429, a 5xx, or no answer at all), shown as the
  entry's ``refused`` by ``pending()`` and counted by ``status()`` (``aimem hook status``).
* ``spool.lock`` — ``flock`` held for every read/append/rewrite. Appenders open the data
  file *after* taking the lock, so a compaction (tmp + fsync + rename) never strands a
  writer on an unlinked inode.
* ``drain.lock`` — held by whoever is re-sending old entries, so two hooks (or a hook and
  the detached drain) do not send the same backlog at once. Re-sending is harmless anyway:
  every entry keeps its idempotency key, which ingress uses as ``Nats-Msg-Id``.

The file stays tiny in steady state: when nothing is pending after a ``mark_done`` it is
truncated. While the server is away it grows up to ``MAX_BYTES``; past that the oldest
entries are dropped at the next append (a bounded spool beats a full disk).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MAX_BYTES = 32 * 1024 * 1024
KEEP_AFTER_OVERFLOW = 0.5  # keep this fraction (newest) of the bytes when over MAX_BYTES
REWRITE_OVER_BYTES = 256 * 1024  # compact instead of appending "done" lines past this size


class Spool:
    """A JSONL spool in ``directory`` (created on first use)."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.path = self.dir / "hooks.jsonl"

    @contextmanager
    def _locked(self, name: str = "spool.lock", *, blocking: bool = True) -> Iterator[bool]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # closing releases the flock

    def append(self, entry: dict[str, Any]) -> None:
        """Append one entry (a single ``write`` under the lock)."""
        line = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._locked():
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size + len(line) > MAX_BYTES:
                self._rewrite(self._pending_unlocked(), budget=int(MAX_BYTES * KEEP_AFTER_OVERFLOW))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def pending(self) -> list[dict[str, Any]]:
        """Return the undelivered entries, oldest first."""
        with self._locked():
            return self._pending_unlocked()

    def mark_done(self, keys: list[str]) -> None:
        """Record ``keys`` as delivered; truncate or compact the file when worthwhile."""
        if not keys:
            return
        with self._locked():
            done = set(keys)
            pending = [e for e in self._pending_unlocked() if e["k"] not in done]
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                return
            if not pending:
                os.truncate(self.path, 0)
            elif size > REWRITE_OVER_BYTES:
                self._rewrite(pending, budget=MAX_BYTES)
            else:
                lines = "".join(json.dumps({"done": k}) + "\n" for k in keys).encode()
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, lines)
                finally:
                    os.close(fd)

    def note_refused(self, keys: list[str], status: int | None) -> None:
        """Record why ``keys`` stay spooled: the HTTP ``status`` that kept them (None: no answer)."""
        if not keys:
            return
        now = round(time.time(), 3)
        lines = "".join(json.dumps({"why": k, "status": status, "at": now}) + "\n" for k in keys).encode()
        with self._locked():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines)
            finally:
                os.close(fd)

    def status(self, now: float | None = None) -> dict[str, Any]:
        """Summarise what the spool holds: ``{path, pending, oldest_age_s, by_reason, last_refused_at}``.

        ``by_reason`` counts entries by the last answer that kept them (``reason_of``);
        ages in seconds.
        """
        now = time.time() if now is None else now
        pending = self.pending() if self.path.exists() else []  # a status never creates the spool
        by_reason: dict[str, int] = {}
        for entry in pending:
            why = reason_of(entry.get("refused"))
            by_reason[why] = by_reason.get(why, 0) + 1
        ages = [now - float(e.get("ts") or now) for e in pending]
        last = max((float(e["refused"]["at"]) for e in pending if isinstance(e.get("refused"), dict)), default=None)
        return {"path": str(self.path), "pending": len(pending),
                "oldest_age_s": round(max(ages), 1) if ages else None, "by_reason": by_reason,
                "last_refused_at": last}

    @contextmanager
    def draining(self, *, wait_s: float = 0.0) -> Iterator[bool]:
        """Hold ``drain.lock``; yields False when another drain holds it after ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._locked("drain.lock", blocking=False) as got:
                if got or time.monotonic() >= deadline:
                    yield got
                    return
            time.sleep(0.05)

    def _pending_unlocked(self) -> list[dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        entries: dict[str, dict[str, Any]] = {}
        for line in raw.splitlines():
            try:
                item = json.loads(line)
            except ValueError:  # a torn line (crash mid-write): skip it
                continue
            if not isinstance(item, dict):
                continue
            if "done" in item:
                entries.pop(str(item["done"]), None)
            elif "why" in item:
                entry = entries.get(str(item["why"]))
                if entry is not None:
                    entry["refused"] = {"status": item.get("status"), "at": item.get("at")}
            elif isinstance(item.get("k"), str):
                entries[item["k"]] = item
        return list(entries.values())

    def _rewrite(self, pending: list[dict[str, Any]], *, budget: int) -> None:
        """Atomically replace the file with ``pending`` (newest kept within ``budget`` bytes)."""
        lines: list[bytes] = []
        used = 0
        for entry in reversed(pending):
            line = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
            if used + len(line) > budget:
                break
            lines.append(line)
            used += len(line)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.write(b"".join(reversed(lines)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


REASONS = {401: "unauthorized (401: the key is unknown or revoked)", 403: "forbidden (403: no write grant)",
           408: "timeout (408)", 429: "saturated (429)"}


def reason_of(refused: Any) -> str:
    """Name why an entry stays spooled from its ``refused`` note (``not sent yet`` without one)."""
    if not isinstance(refused, dict):
        return "not sent yet"
    status = refused.get("status")
    if status is None:
        return "no answer (server down or slow)"
    if status in REASONS:
        return REASONS[status]
    return f"server error ({status})" if isinstance(status, int) and status >= 500 else f"refused ({status})"
