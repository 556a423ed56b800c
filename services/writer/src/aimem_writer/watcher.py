"""Reindex pages edited by hand in the wiki (Obsidian, vim) — watchdog → writer thread.

watchdog delivers file events on its own thread; they are handed to the event loop, which
debounces them (``DEBOUNCE_S``) and runs ``reindex_paths`` on the writer thread. The writer's
own writes are ignored by content: a file whose text hashes to the live version's
``content_hash`` is a no-op, so no bookkeeping of "who wrote what" can go stale.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from aimem_common.wikifmt import META_FILE, is_ledger_name

from aimem_writer.wiki import TMP_PREFIX

log = logging.getLogger("aimem.writer.watcher")

DEBOUNCE_S = 0.3


def candidate_rel(root: Path, path: str) -> str | None:
    """Return the rel key of a page file worth reindexing, or None (git, tmp, manifests, ledgers)."""
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None
    parts = rel.split("/")
    if len(parts) < 3 or not rel.endswith(".md"):
        return None
    if any(p.startswith(".") for p in parts):
        return None
    name = parts[-1]
    if name.startswith(TMP_PREFIX) or name == META_FILE or (len(parts) == 3 and is_ledger_name(name)):
        return None
    return rel


class _Handler(FileSystemEventHandler):
    def __init__(self, root: Path, loop: asyncio.AbstractEventLoop, sink):
        self.root = root
        self.loop = loop
        self.sink = sink

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        for p in (event.src_path, getattr(event, "dest_path", None)):
            if not p:
                continue
            rel = candidate_rel(self.root, p if isinstance(p, str) else p.decode())
            if rel:
                self.loop.call_soon_threadsafe(self.sink, rel)


class WikiWatcher:
    """Watch ``root`` recursively and call ``reindex(rels)`` (async) with debounced batches."""

    def __init__(self, root: Path, reindex):
        self.root = Path(root)
        self.reindex = reindex
        self._pending: set[str] = set()
        self._wake = asyncio.Event()
        self._observer: Observer | None = None
        self._task: asyncio.Task | None = None

    def _add(self, rel: str) -> None:
        self._pending.add(rel)
        self._wake.set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._observer = Observer()
        self._observer.schedule(_Handler(self.root, loop, self._add), str(self.root), recursive=True)
        self._observer.daemon = True
        self._observer.start()
        self._task = asyncio.create_task(self._drain(), name="wiki-watcher")

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(DEBOUNCE_S)
            self._wake.clear()
            batch, self._pending = sorted(self._pending), set()
            if not batch:
                continue
            try:
                await self.reindex(batch)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad file must not stop the watcher
                log.exception("reindexing hand edits failed")

    async def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            await asyncio.to_thread(self._observer.join, 5)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
