"""Store faults: hold the writer while the store refuses writes, and say so.

A store fault (disk full, I/O error) never drops a command: the batch stays in hand and is
retried with backoff up to ``writer.store_retry_max_s`` until the store takes it; meanwhile the
fault is announced on ``aimem.status.writer`` (ingress answers 507/503 instead of 202) and
``/healthz`` turns red. Event loop; the writes themselves run on the writer thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.bus import BUNDLE_VERSION, BUNDLES_STATUS_KEY
from aimem_common.config import Settings
from aimem_common.errors import StoreFaultError

from aimem_writer.batch import Applier
from aimem_writer.metrics import WriterMetrics
from aimem_writer.thread import WriterThread

log = logging.getLogger("aimem.writer.consumer")


@dataclass(eq=False)
class StoreFaultHold:
    """The writer's store state: runs writer-thread calls through store faults and announces it.

    Args:
        settings: the writer's settings (``store_retry_max_s``, ``status_interval_s``).
        nc: connected NATS client (status announcements).
        thread: the writer thread.
        applier: the ``Applier`` living on that thread.
        metrics: writer metrics.
        stop: set when the consumer stops (a held call then raises).
    """

    settings: Settings
    nc: NATS
    thread: WriterThread
    applier: Applier
    metrics: WriterMetrics
    stop: asyncio.Event
    fault: StoreFaultError | None = field(default=None, init=False)  # set while the store refuses writes
    fault_since: float | None = field(default=None, init=False)  # epoch s

    async def hold(self, fn, *args):
        """Run ``fn(*args)`` on the writer thread, retrying store faults with backoff until it
        succeeds; returns its result.

        Raises:
            StoreFaultError: still failing when ``stop()`` was called.
            Exception: whatever else ``fn`` raised (not retried here).
        """
        delay = 0.25
        while True:
            try:
                result = await self.thread.call(fn, *args)
            except StoreFaultError as fault:
                self.enter(fault)
                if self.stop.is_set():
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.writer.store_retry_max_s)
                continue
            return result

    async def recover_outbox(self) -> None:
        """After a post-commit flush fault: re-flush the owed wiki files until the disk takes them."""
        delay = 0.25
        while not self.stop.is_set():
            try:
                await self.thread.call(self.applier.recover)
                return
            except StoreFaultError as fault:
                self.enter(fault)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.writer.store_retry_max_s)

    def enter(self, fault: StoreFaultError) -> None:
        reason = (fault.data or {}).get("reason", "io_error")
        if self.fault is None:
            self.fault_since = time.time()
            log.error("store fault (%s), holding the batch and retrying: %s", reason, fault.message)
            self.metrics.store_faults.labels(reason).inc()
            self.metrics.store_fault.labels(reason).set(1)
            asyncio.get_running_loop().create_task(self.publish_status())
        self.fault = fault

    def leave(self) -> None:
        if self.fault is None:
            return
        reason = (self.fault.data or {}).get("reason", "io_error")
        log.warning("store accepts writes again after %.1f s (%s)", time.time() - (self.fault_since or 0), reason)
        self.metrics.store_fault.labels(reason).set(0)
        self.fault = self.fault_since = None
        asyncio.get_running_loop().create_task(self.publish_status())

    def status(self) -> dict:
        """Return the store state announced to ingress: ``{state, bundles, reason?, detail?, since?,
        retry_after_s?}``; ``bundles`` says this writer reads bundled hooks (ingress gathers
        hooks only while the writer says so)."""
        if self.fault is None:
            return {"state": "ok", BUNDLES_STATUS_KEY: BUNDLE_VERSION}
        return {"state": "store_fault", BUNDLES_STATUS_KEY: BUNDLE_VERSION,
                "reason": (self.fault.data or {}).get("reason", "io_error"),
                "detail": self.fault.message[:300], "since": self.fault_since,
                "retry_after_s": max(1, int(self.settings.writer.store_retry_max_s))}

    async def publish_status(self) -> None:
        try:
            await self.nc.publish(busmod.WRITER_STATUS_SUBJECT, json.dumps(self.status()).encode())
        except nats.errors.Error as exc:
            log.debug("status not announced: %s", exc)

    async def announce(self) -> None:
        while True:
            await self.publish_status()
            await asyncio.sleep(self.settings.writer.status_interval_s)
