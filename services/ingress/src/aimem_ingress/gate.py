"""Back-pressure gate: the writer's lag and store state, refreshed on ingress's own clock.

A hook request never waits for ``consumer_info``: a background task samples the writer's
progress every ``interval_s`` (whether or not hooks arrive) and ``check()`` acts on the last
sample. The bound is a time: how many seconds of work the writer has in front of it — the
pending messages over its measured rate of acked messages (a bundle of hooks is one message
either way, so the ratio is a time whatever the bundles carry), or, when it makes no progress
at all with work pending (stopped, wedged), how long that has lasted. A count bound
(``max_lag``, in messages) stays as a backstop.

The writer also announces its store state (``aimem.status.writer``): while it reports a
store fault, ``check()`` answers 507 (disk full) or 503 (I/O error) with ``Retry-After``,
because a 202 would promise what the writer cannot keep right now.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable

from aimem_common.bus import BUNDLE_VERSION, BUNDLES_STATUS_KEY, WriterProgress
from aimem_common.errors import AimemError, BackPressureError, InsufficientStorageError, UnavailableError

log = logging.getLogger("aimem.ingress.gate")

RATE_ALPHA = 0.3  # EWMA weight of the newest apply-rate sample


class LagGate:
    """Refuse new commands while the writer is too far behind or cannot store.

    Args:
        read_progress: coroutine returning a ``WriterProgress`` (``Bus.writer_progress``).
        max_lag: pending messages above which ``check`` raises (count backstop; a bundle counts once).
        max_delay_s: seconds of writer backlog above which ``check`` raises.
        interval_s: seconds between two progress samples (background task).
        retry_after_s: the ``Retry-After`` hint of a 429.
        status_stale_s: a writer store-fault announcement older than this is ignored.
    """

    def __init__(self, read_progress: Callable[[], Awaitable[WriterProgress]], *, max_lag: int,
                 max_delay_s: float, interval_s: float, retry_after_s: int, status_stale_s: float = 5.0):
        self._read = read_progress
        self.max_lag = max_lag
        self.max_delay_s = max_delay_s
        self.interval_s = interval_s
        self.retry_after_s = retry_after_s
        self.status_stale_s = status_stale_s
        self.lag = 0
        self.delay_s = 0.0
        self.rate: float | None = None  # messages acked per second (EWMA), None before a sample
        self._acked_seq: int | None = None
        self._sampled_at = 0.0
        self._progress_at = time.monotonic()  # last time the ack floor moved (or nothing was pending)
        self._store: dict | None = None
        self._store_at = 0.0
        self._task: asyncio.Task | None = None
        self._closing = False

    # -- the hot path -------------------------------------------------------------
    def check(self) -> None:
        """Raise when a new command should not be accepted now (event loop, no I/O).

        Raises:
            InsufficientStorageError: the writer reports its disk full (507).
            UnavailableError: the writer reports another store fault (503, ``store_fault``).
            BackPressureError: backlog over ``max_delay_s`` or ``max_lag`` (429).
        """
        fault = self.store_fault()
        if fault is not None:
            retry = max(1, math.ceil(float(fault.get("retry_after_s") or self.retry_after_s)))
            msg = f"the writer cannot store right now ({fault.get('reason')}: {fault.get('detail', '')}); retry later"
            data = {"reason": fault.get("reason"), "since": fault.get("since")}
            if fault.get("reason") == "disk_full":
                raise InsufficientStorageError(msg, retry_after_s=retry, data=data)
            err = UnavailableError(msg, code="store_fault", data=data)
            err.retry_after_s = retry
            raise err
        if self.lag > self.max_lag or self.delay_s > self.max_delay_s:
            raise BackPressureError(
                f"writer is {self.lag} messages / {self.delay_s:.0f} s behind "
                f"(bounds {self.max_lag}, {self.max_delay_s:g} s); retry later",
                retry_after_s=self.retry_after_s,
                data={"writer_lag": self.lag, "writer_delay_s": round(self.delay_s, 1)},
            )

    def store_fault(self) -> dict | None:
        """Return the writer's last store-fault announcement while fresh, else None."""
        if self._store is None or self._store.get("state") == "ok":
            return None
        if time.monotonic() - self._store_at > self.status_stale_s:
            return None
        return self._store

    def writer_reads_bundles(self) -> bool:
        """True while the writer's fresh announcement says it reads bundled hooks
        (``aimem_common.bundles``); False before any, or once it is stale."""
        status = self._store
        version = status.get(BUNDLES_STATUS_KEY) if status is not None else None
        return (isinstance(version, int) and version >= BUNDLE_VERSION
                and time.monotonic() - self._store_at <= self.status_stale_s)

    # -- inputs ---------------------------------------------------------------------
    async def on_writer_status(self, msg) -> None:
        """NATS callback for ``aimem.status.writer``: remember the writer's store state."""
        try:
            status = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(status, dict):
            self._store, self._store_at = status, time.monotonic()

    async def refresh(self) -> int:
        """Sample the writer's progress now and update lag, rate and delay; returns the lag.

        A failed read keeps the previous values (logged).
        """
        try:
            p = await self._read()
        except AimemError as exc:
            log.warning("cannot read writer progress: %s", exc.message)
            return self.lag
        self.observe(p, time.monotonic())
        return self.lag

    def observe(self, p: WriterProgress, now: float) -> None:
        """Fold one progress sample taken at ``now`` (monotonic s) into lag, rate and delay."""
        prev_seq, prev_at, prev_lag = self._acked_seq, self._sampled_at, self.lag
        self._acked_seq, self._sampled_at, self.lag = p.acked_seq, now, p.pending
        if prev_seq is not None and now > prev_at:
            applied = max(0, p.acked_seq - prev_seq)
            if applied or prev_lag:
                sample = applied / (now - prev_at)
                self.rate = sample if self.rate is None else RATE_ALPHA * sample + (1 - RATE_ALPHA) * self.rate
        if p.pending == 0 or prev_seq is None or p.acked_seq != prev_seq or prev_lag == 0:
            self._progress_at = now
        stalled_s = now - self._progress_at
        backlog_s = p.pending / self.rate if self.rate else 0.0
        self.delay_s = max(stalled_s, backlog_s) if p.pending else 0.0

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling every ``interval_s`` on the running loop (lifespan)."""

        async def loop() -> None:
            # The flag, not only cancel(): nats-py may turn a cancelled request into its own
            # timeout error, which refresh() then swallows as a missed sample.
            while not self._closing:
                await self.refresh()
                await asyncio.sleep(self.interval_s)

        self._closing = False
        self._task = asyncio.get_running_loop().create_task(loop(), name="ingress-lag-gate")

    async def close(self) -> None:
        """Stop the sampling task (lifespan shutdown)."""
        self._closing = True
        if self._task and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
