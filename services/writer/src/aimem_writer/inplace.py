"""Retry a batch whose apply failed unexpectedly in place, before anything fetched after it.

Trigger: ``Applier.apply`` raised an error that is neither a store fault (held by the
consumer until the store takes the batch) nor a command's own error (answered or kept as a
dead letter by the applier). Nothing was committed: the applier rolls back, and nothing
after its ``COMMIT`` raises.

Why in place: left to JetStream, the batch would come back after ``ack_wait_s``, behind the
commands fetched since, which would be applied first. Nak'ing it with what was prefetched
does not keep the order either (a large fetch leaves messages in the pull subscription's
queue that the next fetch hands out before the redelivery), and every nak counts a delivery
toward the dead letter. So the messages stay in hand (the consumer's in-progress acks keep
them from expiring) and the apply is attempted again ``RETRY_PAUSE_S`` apart, up to
``writer.max_deliver`` attempts in all, or until a stop (the batch is then handed back, in
stream order, with everything fetched after it).

Outcome: a batch that outlasts its attempts is applied one command at a time; only a
command that still fails alone is left to JetStream (``Applier.give_up``: nak'ed, and a dead
letter at ``writer.max_deliver`` deliveries), so a poison command never takes the commands
around it along, however large the backlog its retries built. Every failed attempt is
counted in ``aimem_writer_batch_failures_total`` (``scope`` ``batch`` or ``command``).

A command handed back that way is remembered (``suspects``, by its bytes). When it comes back,
its batch is not attempted whole: the commands before it, then it alone, then the commands
after it are applied in that order (each run of others through ``run``, with its in-place
retries), and it is given up again at once if it still fails alone. Its later deliveries
then stall nothing (before: ``writer.max_deliver`` − 1 pauses each), while the order of the
others, applying each once and its one dead letter hold. Going one command at a time sooner
for every failing batch would not keep the order: the whole-batch attempts are what lets an
error that is nobody's (a passing fault of the writer itself) clear before any command of the
batch is nak'ed and comes back behind later ones.

After the COMMIT (``step``): the consumer's own steps between a committed batch and its acks
(the requested git checkpoint, the replies, the events, the acks) are retried in place the
same way, ``RETRY_PAUSE_S`` apart up to ``writer.max_deliver`` attempts, then given up, and
the consumer goes on to the next step. Left to JetStream instead, the batch would come back
after ``ack_wait_s`` as duplicates (``ingest_keys``): its callers answered late and after
later commands, its events never sent (a duplicate emits none). Each failed attempt counts
as ``scope="post_apply"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prometheus_client import Counter

from aimem_common.errors import StoreFaultError

from aimem_writer.commands import BatchResult, Incoming, Outcome

log = logging.getLogger("aimem.writer.inplace")

RETRY_PAUSE_S = 1.0  # between two attempts of a failing batch
MAX_SUSPECTS = 1024  # commands remembered as handed back after failing alone (oldest forgotten first)

POST_APPLY = "post_apply"  # the failures label of a step after the COMMIT (``InPlaceRetry.step``)

ApplyFn = Callable[[list[Incoming]], Awaitable[BatchResult]]
GiveUpFn = Callable[[Incoming, BaseException], Awaitable[Outcome]]


def merge_results(results: list[BatchResult]) -> BatchResult:
    """Concatenate the results of consecutive applies into one: outcomes and events in
    order, files and durations summed, the last flush fault (an earlier one is recovered by
    the next apply before it runs, or raised there)."""
    faults = [r.flush_fault for r in results if r.flush_fault is not None]
    return BatchResult([o for r in results for o in r.outcomes], [e for r in results for e in r.events],
                       sum(r.files for r in results), sum(r.duration_s for r in results),
                       faults[-1] if faults else None)


@dataclass(slots=True)
class InPlaceRetry:
    """Applies one fetched batch, retrying it in place (see the module docstring). Event loop.

    Args:
        apply: applies a list of commands on the writer thread, holding store faults (raises
            ``StoreFaultError`` only at a stop).
        give_up: settles a command that failed alone (``Applier.give_up``, held the same way).
        attempts: applies of the whole batch before it goes one command at a time (``writer.max_deliver``;
            below 1 counts as 1).
        stop: set when the consumer stops.
        failures: ``aimem_writer_batch_failures_total`` (label ``scope``).
        pause_s: seconds between two attempts.
        suspects: digests of the commands handed back after failing alone (see the module
            docstring), in the order they were added; at most ``MAX_SUSPECTS``.
    """

    apply: ApplyFn
    give_up: GiveUpFn
    attempts: int
    stop: asyncio.Event
    failures: Counter
    pause_s: float = RETRY_PAUSE_S
    suspects: dict[bytes, None] = field(default_factory=dict)

    async def run(self, items: list[Incoming]) -> BatchResult:
        """Apply ``items``; returns one outcome per item, in order, or fewer at a stop during
        the one-at-a-time step (the rest is unsettled: the consumer hands it back).

        Raises:
            StoreFaultError: a store fault at a stop (nothing settled).
            Exception: the batch's own error when the consumer stops between two attempts.
        """
        if self.suspects:  # usually empty: no digest on the hot path
            flags = [_digest(i) in self.suspects for i in items]
            if any(flags):
                return await self._around_suspects(items, flags)
        last: Exception | None = None
        attempts = max(1, self.attempts)
        for attempt in range(1, attempts + 1):
            try:
                return await self.apply(items)
            except StoreFaultError:
                raise  # only at a stop: a store fault is held by ``apply`` itself
            except Exception as exc:  # noqa: BLE001 - nothing committed: attempted again
                last = exc
                self.failures.labels("batch").inc()
                log.warning("batch of %d failed (attempt %d of %d), retrying in place: %r",
                            len(items), attempt, attempts, exc)
            if self.stop.is_set() or (attempt < attempts and await self._stopped_within(self.pause_s)):
                raise last
        if len(items) == 1:
            return BatchResult([await self._give_up(items[0], last)])
        log.error("batch of %d failed %d times: applying it one command at a time", len(items), attempts)
        return await self._one_by_one(items)

    async def step(self, fn: Callable[[], Awaitable[None]], what: str) -> bool:
        """Run ``fn()``, a step after a batch's COMMIT, retrying it in place when it raises.

        ``fn`` must be safe to run again after it raised part-way (it keeps its own progress,
        e.g. the replies already sent). Attempts are ``pause_s`` apart, up to ``attempts`` in
        all; a stop ends them at once. Each failure counts once as ``scope="post_apply"``.

        Args:
            fn: the step (event loop; may call the writer thread).
            what: the step's name for the log, e.g. ``"the replies"``.
        Returns:
            True once ``fn`` returned, False when it was given up (logged as an error).
        """
        attempts = max(1, self.attempts)
        for attempt in range(1, attempts + 1):
            try:
                await fn()
                return True
            except Exception as exc:  # noqa: BLE001 - committed: retried, then given up, never lost
                self.failures.labels(POST_APPLY).inc()
                if attempt == attempts or self.stop.is_set() or await self._stopped_within(self.pause_s):
                    log.error("%s failed after the commit (attempt %d of %d), giving up: %r",
                              what, attempt, attempts, exc)
                    return False
                log.warning("%s failed after the commit (attempt %d of %d), retrying in place: %r",
                            what, attempt, attempts, exc)
        return False  # not reached: the last attempt returns above

    async def _one_by_one(self, items: list[Incoming]) -> BatchResult:
        results: list[BatchResult] = []
        for item in items:
            if self.stop.is_set():
                break  # the rest stays unsettled and is handed back in order
            try:
                try:
                    results.append(await self.apply([item]))
                except StoreFaultError:
                    raise
                except Exception as exc:  # noqa: BLE001 - this command fails alone: JetStream's
                    self.failures.labels("command").inc()
                    results.append(BatchResult([await self._give_up(item, exc)]))
            except StoreFaultError:
                break  # a store fault at a stop
        return merge_results(results)

    async def _around_suspects(self, items: list[Incoming], suspect: list[bool]) -> BatchResult:
        """Apply ``items``, a batch holding suspects (``suspect[i]``): each run of other commands
        through ``run`` (in-place retries), each suspect alone once (given up at once when it
        fails again), in order. Returns fewer outcomes than ``items`` when a stop cut it short
        (the rest is unsettled); raises like ``run`` when a stop comes before anything was
        applied."""
        results: list[BatchResult] = []
        start = 0
        while start < len(items) and not self.stop.is_set():
            end = start + 1
            while not suspect[start] and end < len(items) and not suspect[end]:
                end += 1
            part = items[start:end]
            try:
                result = await (self._suspect_alone(part[0]) if suspect[start] else self.run(part))
            except Exception:  # noqa: BLE001 - only at a stop (``run``): settle what was applied
                if results:
                    break
                raise
            results.append(result)
            if len(result.outcomes) < len(part):
                break  # a stop cut that part short
            start = end
        return merge_results(results)

    async def _suspect_alone(self, item: Incoming) -> BatchResult:
        """Apply a command that failed alone before, once; give it up again at once if it fails."""
        try:
            result = await self.apply([item])
        except StoreFaultError:
            raise
        except Exception as exc:  # noqa: BLE001 - it fails alone again: JetStream's, or a dead letter
            self.failures.labels("command").inc()
            log.warning("a command that failed alone before fails again (delivery %d): %r", item.num_delivered, exc)
            return BatchResult([await self._give_up(item, exc)])
        self.suspects.pop(_digest(item), None)
        return result

    async def _give_up(self, item: Incoming, exc: BaseException) -> Outcome:
        """``give_up(item, exc)``, remembering the command as a suspect while it is handed back
        (``nak``) and forgetting it once it is settled for good."""
        outcome = await self.give_up(item, exc)
        key = _digest(item)
        self.suspects.pop(key, None)
        if outcome.action == "nak":
            self.suspects[key] = None
            while len(self.suspects) > MAX_SUSPECTS:
                del self.suspects[next(iter(self.suspects))]
        return outcome

    async def _stopped_within(self, seconds: float) -> bool:
        """Wait up to ``seconds``; return True as soon as the consumer stops."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), seconds)
        return self.stop.is_set()


def _digest(item: Incoming) -> bytes:
    """A command's identity for ``InPlaceRetry.suspects``: a digest of its bytes (16 bytes)."""
    return hashlib.blake2b(item.data, digest_size=16).digest()
