"""Background schedules: non-overlapping ticks, safe with several maintainer replicas.

Each job runs in one asyncio task that awaits its own pass before sleeping again, so a long
pass delays the next tick and never runs twice in one process. Across replicas a NATS KV
lease (bucket ``AIMEM_MAINT_LEASES``, TTL = ``maintenance.lease_ttl_s``, renewed every third
of it while the pass runs) lets exactly one replica run a job at a time, and the last
completed run time (bucket ``AIMEM_MAINT_STATE``) keeps the interval store-wide: a replica
that wins the lease right after another finished sees the job is not due and skips it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.js.api import StorageType
from nats.js.kv import KeyValue

log = logging.getLogger("aimem.maintainer.scheduler")

LEASE_BUCKET = "AIMEM_MAINT_LEASES"
STATE_BUCKET = "AIMEM_MAINT_STATE"


class Leases:
    """Job leases and last-run stamps in NATS KV."""

    def __init__(self, leases: KeyValue, state: KeyValue, owner: str, ttl_s: float):
        self.leases, self.state, self.owner, self.ttl_s = leases, state, owner, ttl_s
        self._rev: dict[str, int] = {}

    @classmethod
    async def open(cls, js: Any, owner: str, ttl_s: float) -> "Leases":
        async def bucket(name: str, ttl: float | None) -> KeyValue:
            try:
                return await js.key_value(name)
            except nats.js.errors.BucketNotFoundError:
                try:
                    return await js.create_key_value(bucket=name, ttl=ttl, history=1, storage=StorageType.FILE)
                except nats.js.errors.BadRequestError:  # another replica created it meanwhile
                    return await js.key_value(name)

        return cls(await bucket(LEASE_BUCKET, ttl_s), await bucket(STATE_BUCKET, None), owner, ttl_s)

    async def acquire(self, job: str) -> bool:
        """Take the lease of ``job``; False when another replica holds it."""
        try:
            self._rev[job] = await self.leases.create(f"lease.{job}", self.owner.encode())
            return True
        except nats.js.errors.KeyWrongLastSequenceError:
            return False

    async def renew(self, job: str) -> bool:
        try:
            self._rev[job] = await self.leases.update(f"lease.{job}", self.owner.encode(), last=self._rev.get(job))
            return True
        except nats.js.errors.KeyWrongLastSequenceError:
            return False

    async def release(self, job: str) -> None:
        rev = self._rev.pop(job, None)
        with contextlib.suppress(nats.js.errors.Error):
            await self.leases.purge(f"lease.{job}") if rev is None else await self.leases.delete(f"lease.{job}", last=rev)

    async def last_run(self, job: str) -> float | None:
        try:
            entry = await self.state.get(f"last.{job}")
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        try:
            return float(json.loads(entry.value or b"{}").get("at"))
        except (TypeError, ValueError):
            return None

    async def mark_run(self, job: str, info: dict[str, Any]) -> None:
        await self.state.put(f"last.{job}", json.dumps({"at": time.time(), "owner": self.owner, **info}).encode())


@dataclass(slots=True)
class Schedule:
    name: str
    interval_s: float
    fn: Callable[[], Awaitable[dict[str, Any]]]


async def run_schedule(sched: Schedule, leases: Leases, stop: asyncio.Event, *, started_at: float) -> None:
    """Tick ``sched`` until ``stop``: wait until due, lease, run, stamp, release."""
    while not stop.is_set():
        last = await _safe(leases.last_run(sched.name)) or started_at
        due_in = max(0.0, last + sched.interval_s - time.time())
        if due_in > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), min(due_in, 5.0))
            continue
        if not await _safe(leases.acquire(sched.name)):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), min(sched.interval_s, 5.0))
            continue
        renewer = asyncio.create_task(_renew(leases, sched.name))
        try:
            # Re-check under the lease: another replica may have just finished this job.
            last = await _safe(leases.last_run(sched.name))
            if last is not None and last + sched.interval_s > time.time():
                continue
            result: dict[str, Any] = {}
            try:
                result = await sched.fn()
            except Exception:  # noqa: BLE001 - a failing pass must not kill the schedule
                log.exception("scheduled %s failed", sched.name)
                result = {"outcome": "error"}
            await _safe(leases.mark_run(sched.name, {"outcome": result.get("outcome", "ok")}))
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await leases.release(sched.name)


async def _renew(leases: Leases, job: str) -> None:
    while True:
        await asyncio.sleep(max(0.5, leases.ttl_s / 3))
        if not await _safe(leases.renew(job)):
            log.warning("lost the lease of %s while running", job)
            return


async def _safe(aw: Awaitable[Any]) -> Any:
    try:
        return await aw
    except (nats.errors.Error, asyncio.TimeoutError) as exc:  # NATS hiccup: skip this tick
        log.warning("scheduler KV call failed: %s", exc)
        return None

