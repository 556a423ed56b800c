"""Back-pressure gate: the writer's lag, cached and refreshed in the background.

A hook request never waits for ``consumer_info``: ``check()`` reads the cached lag and, when
it is older than ``interval_s``, starts one refresh task (single flight). So the lag the
gate acts on is at most ``interval_s`` plus one round trip old — enough for a bound that
exists to stop unbounded queueing, not to meter individual requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aimem_common.errors import AimemError, BackPressureError

log = logging.getLogger("aimem.ingress.gate")


class LagGate:
    """Refuse new commands (429) while the writer's pending count is over ``max_lag``.

    Args:
        read_lag: coroutine returning the writer's pending commands (``Bus.writer_lag``).
        max_lag: pending commands above which ``check`` raises.
        interval_s: minimum seconds between two lag reads.
        retry_after_s: the ``Retry-After`` hint of the 429.
    """

    def __init__(self, read_lag: Callable[[], Awaitable[int]], *, max_lag: int, interval_s: float,
                 retry_after_s: int):
        self._read_lag = read_lag
        self.max_lag = max_lag
        self.interval_s = interval_s
        self.retry_after_s = retry_after_s
        self.lag = 0
        self._read_at = float("-inf")
        self._task: asyncio.Task | None = None

    def check(self) -> None:
        """Raise ``BackPressureError`` when the cached lag is over the bound (event loop).

        Side effect: schedules a background refresh when the cache is stale.
        """
        if time.monotonic() - self._read_at >= self.interval_s and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self.refresh())
        if self.lag > self.max_lag:
            raise BackPressureError(
                f"writer is {self.lag} commands behind (bound {self.max_lag}); retry later",
                retry_after_s=self.retry_after_s, data={"writer_lag": self.lag},
            )

    async def refresh(self) -> int:
        """Read the lag now and cache it; a failed read keeps the previous value."""
        self._read_at = time.monotonic()
        try:
            self.lag = await self._read_lag()
        except AimemError as exc:
            log.warning("cannot read writer lag: %s", exc.message)
        return self.lag

    async def close(self) -> None:
        """Cancel a refresh in flight (lifespan shutdown)."""
        if self._task and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
