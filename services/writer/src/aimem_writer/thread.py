"""The single writer thread (datasette ``execute_write_fn`` style).

Every SQLite and wiki operation runs on one daemon thread fed by a ``queue.Queue``; the
event loop awaits a future resolved with ``loop.call_soon_threadsafe``. Functions passed in
must be sync. ``close()`` is idempotent: it enqueues a sentinel and joins (10 s).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger("aimem.writer.thread")

T = TypeVar("T")
_SHUTDOWN = object()


class WriterClosedError(RuntimeError):
    """The writer thread was closed; no more work is accepted."""


class WriterThread:
    """One thread that runs submitted sync functions in order."""

    def __init__(self, name: str = "aimem-writer"):
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is _SHUTDOWN:
                return
            fn, args, loop, fut = task
            try:
                result = fn(*args)
            except BaseException as exc:  # delivered to the awaiting caller
                if loop is None:
                    fut.set_exception(exc)
                else:
                    loop.call_soon_threadsafe(_deliver, fut, None, exc)
                continue
            if loop is None:
                fut.set_result(result)
            else:
                loop.call_soon_threadsafe(_deliver, fut, result, None)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the writer thread and await its result (or exception).

        Raises:
            WriterClosedError: after ``close()``.
        """
        if self._closed:
            raise WriterClosedError("writer thread is closed")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.put((fn, args, loop, fut))
        return await fut

    def call_sync(self, fn: Callable[..., T], *args: Any, timeout_s: float | None = None) -> T:
        """Run ``fn(*args)`` on the writer thread from a non-async thread and wait."""
        import concurrent.futures

        if self._closed:
            raise WriterClosedError("writer thread is closed")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((fn, args, None, fut))
        return fut.result(timeout_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop accepting work, finish queued work, join the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_SHUTDOWN)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("writer thread did not stop within %.0f s", timeout_s)


def _deliver(fut: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if fut.done():  # the caller was cancelled
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)
