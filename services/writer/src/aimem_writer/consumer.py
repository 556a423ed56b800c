"""The durable pull consumer: fetch → apply (writer thread) → replies/events → ack.

Control flows one way: ``Consumer`` (this loop) → ``pacing.Lanes`` (what to fetch) →
``inplace.InPlaceRetry`` (apply, retried in place) → ``storefaults.StoreFaultHold`` (held
through store faults) → the writer thread; then ``settlement.Settlement`` (checkpoint request,
replies, events, acks) and ``gitcheckpoints.Checkpoints`` (the debounced git commit).

Order per batch (DESIGN.md "The bus"): one SQLite transaction and the wiki flush on the
writer thread; then, on the event loop, each reply is published on its ``Aimem-Reply-To``
inbox, events go to ``AIMEM_EVT``, and only then are the messages acked (``nak`` with a
delay for transient failures, ``term`` for a dead letter). A crash anywhere before the
ack replays the batch; ``ingest_keys`` turns the replay into stored replies.

Store faults (disk full, I/O error) never drop a command: the batch stays in hand (in-progress
acks keep JetStream from redelivering it), nothing more is fetched, ``/healthz`` turns red,
the fault is announced on ``aimem.status.writer`` (so ingress answers 507/503 instead of
202), and the same batch is retried with backoff up to ``writer.store_retry_max_s`` until
the store takes it. A batch whose apply fails with any other unexpected error is retried in
place too, before anything fetched after it (``inplace.py``: up to ``writer.max_deliver``
attempts ~1 s apart, then one command at a time). So is a failure after the COMMIT (the
requested git checkpoint, the replies, the events, the acks: ``InPlaceRetry.step``): the batch
is not applied again, and its messages are acked once the step succeeds or is given up, before
the next batch is applied.

A message is in hand from its fetch to its ack; one that has been in hand for
``ack_wait_s/3`` since its fetch (or its last in-progress ack) gets an in-progress ack,
checked every ``ack_wait_s/6``, so none goes more than about ``ack_wait_s/2`` without
one. A batch that commits well within ``ack_wait_s`` sends none (each one is a publish, for
the writer and for nats-server), a slow or held one keeps every message alive, and a killed
writer's batch is redelivered within ``ack_wait_s`` of its death, not after a long fixed
timeout.

Hooks trickling in are gathered (``_linger``): a fetched batch smaller than
``writer.batch_linger_msgs`` that nobody waits on waits up to ``writer.batch_linger_ms`` for
the commands behind it, so a few hundred hooks a second make transactions of tens of commands
instead of threes (at 500 ev/s with arrivals spread out, 3 → 30 commands a batch and the
writer's CPU per hook 690-720 → 290-330 µs: bench/hook_ingest.py). Their 202 was answered at
the PubAck; only the time until they are searchable grows, by at most the linger. It starts
only while commands arrive fast enough to fill it (``ArrivalRate``: a lone hook after a quiet
spell is applied at once), and a command with an ``Aimem-Reply-To`` caller ends it at once.

Live first (DESIGN.md "Hook ingress"): the writer has two durables, ``writer`` on ``AIMEM_MUT``
(live hooks, MCP and admin writes) and ``writer-bulk`` on ``AIMEM_BULK`` (imports). Each fetch
takes the live lane first; only when that left nothing pending does it add a slice of the
bulk lane sized to apply in about ``writer.bulk_slice_ms`` (``bulk_slice``: the measured cost
of a command, at most ``writer.bulk_batch_max_msgs``). So a live command waits behind at most
the bulk slice being applied and the one prefetched, never behind an import's backlog, and an import goes as fast as the writer allows while nothing live
arrives. Each lane is applied in its own stream order (an imported session's historical end
after its observations); batches may hold both lanes (order across lanes carries no meaning).

Git checkpoints are debounced: the first batch that touched the wiki schedules one
``writer.git_debounce_ms`` later; the batches in between ride along.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

import nats.errors
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.config import Settings
from aimem_common.errors import StoreFaultError

from aimem_writer.batch import Applier
from aimem_writer.commands import BatchResult
from aimem_writer.gitcheckpoints import Checkpoints
from aimem_writer.inplace import InPlaceRetry
from aimem_writer.messages import command_count, commands_of, settled_count, settlements, split_batch
from aimem_writer.metrics import WriterMetrics
from aimem_writer.pacing import LINGER_MIN_EXPECTED, ArrivalRate, Lanes, command_budget, fetch_size, first_fetch_size, lingers
from aimem_writer.settlement import NAK_DELAY_S, Settlement
from aimem_writer.storefaults import StoreFaultHold
from aimem_writer.thread import WriterThread
from aimem_writer.tx import Event

log = logging.getLogger("aimem.writer.consumer")

LAG_POLL_S = 2.0


class Consumer:
    """Runs the ``writer`` and ``writer-bulk`` durable consumers until ``stop()``.

    Args:
        settings: writer settings (batch size, fetch timeout, debounce).
        nc: connected NATS client.
        thread: the writer thread.
        applier: the ``Applier`` living on that thread.
        metrics: writer metrics.
    """

    def __init__(self, settings: Settings, nc: NATS, thread: WriterThread, applier: Applier, metrics: WriterMetrics):
        self.settings = settings
        self.nc = nc
        self.js = nc.jetstream()
        self.thread = thread
        self.applier = applier
        self.metrics = metrics
        self._stop = asyncio.Event()
        self.ready = asyncio.Event()
        self.batches = 0
        self.arrivals = ArrivalRate()
        self._prefetch: asyncio.Task | None = None  # the next fetch, in flight while a batch is applied
        self._held: list = []  # the batch fetched and not yet settled (handed back at a stop)
        # id(msg) → [msg, monotonic s of its fetch or last in-progress ack]: fetched, not yet settled
        self._in_hand: dict[int, list] = {}
        self.lanes = Lanes(settings, self._in_hand)
        self.faults = StoreFaultHold(settings, nc, thread, applier, metrics, self._stop)
        self.checkpoints = Checkpoints(settings, thread, applier)
        self._retry = InPlaceRetry(partial(self.faults.hold, applier.apply), partial(self.faults.hold, applier.give_up),
                                   settings.writer.max_deliver, self._stop, metrics.batch_failures)
        self.settlement = Settlement(nc, applier, self.checkpoints, self._retry, metrics)

    @property
    def fault(self) -> StoreFaultError | None:
        """The store fault holding the writer, None while the store takes writes."""
        return self.faults.fault

    def status(self) -> dict:
        """The store state announced to ingress (``StoreFaultHold.status``)."""
        return self.faults.status()

    def schedule_checkpoint(self) -> None:
        """Schedule a debounced git checkpoint (``Checkpoints.schedule``)."""
        self.checkpoints.schedule()

    async def flush_checkpoint(self) -> str | None:
        """Run any pending checkpoint now (``Checkpoints.flush``); return the commit id or None."""
        return await self.checkpoints.flush()

    async def publish_events(self, events: list[Event]) -> None:
        """Publish committed events (``Settlement.publish_events``): the watcher's hand edits."""
        await self.settlement.publish_events(events)

    async def run(self) -> None:
        """Fetch and apply batches until ``stop()``; never raises on transient NATS errors."""
        w = self.settings.writer
        sub = await self.js.pull_subscribe_bind(durable=busmod.WRITER_DURABLE, stream=busmod.MUT_STREAM)
        bulk_sub = await self.js.pull_subscribe_bind(durable=busmod.BULK_DURABLE, stream=busmod.BULK_STREAM)
        side = [asyncio.create_task(self._poll_lag(), name="writer-lag"),
                asyncio.create_task(self._keep_alive(), name="writer-in-progress"),
                asyncio.create_task(self.faults.announce(), name="writer-status")]
        await self._count_dead_letters()
        self.ready.set()

        async def fetch(size: int) -> list:
            return await self.lanes.fetch_lanes(partial(self.lanes.fetch_one, sub),
                                                partial(self.lanes.fetch_one, bulk_sub), size)

        # Prefetch: the next batch travels over the network while this one is applied on
        # the writer thread. Batches are still applied and acked strictly in order. Behind
        # (commands still pending after this batch), the next fetch is larger: fewer, larger
        # transactions catch up faster (one COMMIT, one wiki flush, one ack round per batch).
        # A fetch is sized in messages and a message may be a bundle: what it brings beyond
        # the command budget is carried (kept in hand, in order) into the next batch.
        self._prefetch = None
        carry: list = []
        try:
            while not self._stop.is_set():
                if carry and command_count(carry) >= command_budget(carry, w):
                    msgs = carry  # a whole batch is in hand already: the prefetch waits
                else:
                    got = await (self._prefetch or asyncio.create_task(fetch(first_fetch_size(self.settings))))
                    self._prefetch = asyncio.create_task(fetch(fetch_size(got, w))) if got else None
                    msgs = self._held = carry + got
                    if got:
                        self.arrivals.observe(command_count(got), time.monotonic())
                if msgs:
                    if self._prefetch is not None:
                        msgs = await self._linger(msgs, fetch)
                    batch, carry = split_batch(msgs, command_budget(msgs, w))
                    try:
                        result = await self.process(batch)
                        self._held = batch[result.settled_msgs:] + carry  # what a stop left unsettled
                    except asyncio.CancelledError:
                        raise
                    except Exception:  # noqa: BLE001 - unacked messages are redelivered
                        # At a stop mid-retry (the batch is handed back); anything else is a bug
                        # here (the steps after the COMMIT are retried and given up in ``process``).
                        log.exception("batch failed; its messages will be redelivered")
                        if not self._stop.is_set():  # at a stop (a held store fault) it is handed back
                            self._held = carry
                        await asyncio.sleep(NAK_DELAY_S)
        finally:
            await self._hand_back(sub, bulk_sub)
            for t in side:
                t.cancel()

    async def _linger(self, msgs: list, fetch) -> list:
        """Gather the commands that arrive within ``batch_linger_ms`` of a small batch into it.

        Commands trickling in at a few hundred a second would each make a transaction of a
        few commands (one COMMIT, the touched session pages rendered and indexed again, one
        event per page): the per-batch work, not the per-command work, is then most of the
        writer's CPU. Lingering only delays when a hook's observation becomes searchable (its
        202 was answered at the PubAck); it stops as soon as the batch is large enough or a
        command someone waits for arrives (``lingers``), and starts only while the arrival
        rate promises ``LINGER_MIN_EXPECTED`` more commands within it. Returns the batch,
        merged; the prefetch in flight stays in ``self._prefetch`` (where a stop finds it).
        """
        w = self.settings.writer
        if self.arrivals.per_s * w.batch_linger_ms / 1000 < LINGER_MIN_EXPECTED:
            return msgs
        deadline = time.monotonic() + w.batch_linger_ms / 1000
        while lingers(msgs, w) and (left := deadline - time.monotonic()) > 0 and not self._stop.is_set():
            done, _ = await asyncio.wait({self._prefetch}, timeout=left)
            if not done:
                break  # the prefetch stays in flight for the next round
            more = self._prefetch.result()
            msgs = self._held = msgs + more
            self._prefetch = asyncio.create_task(fetch(fetch_size(msgs, w)))
            if not more:
                break  # idle fetch timed out
            self.arrivals.observe(command_count(more), time.monotonic())
        return msgs

    async def _hand_back(self, sub, bulk_sub) -> None:
        """At stop: let the prefetch finish, drop the pull subscription, then nak every message not
        settled — the batch in hand (stopped mid-linger, mid-apply or held on a store fault)
        and what the prefetch got — in stream order, so JetStream redelivers them at once and
        in that order. Left to ``ack_wait_s`` instead, they would come back after the commands
        published meanwhile, which the next writer would apply first. The prefetch is not
        cancelled: a cancelled fetch drops the messages it already received and leaves its pull
        request open at the server, which would take the first redelivery into an inbox nobody
        reads; both would then wait ``ack_wait_s``. A batch that was committed but not acked
        comes back as a duplicate (``ingest_keys``)."""
        prefetch, self._prefetch = self._prefetch, None
        later: list = []
        if prefetch is not None:
            try:  # a fetch ends by itself within fetch_timeout_s: what it got is handed back too
                later = await asyncio.wait_for(prefetch, self.settings.writer.fetch_timeout_s + 1.0)
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                later = []
        held, self._held = self._held, []
        for s in (sub, bulk_sub):
            try:
                await s.unsubscribe()
            except Exception:  # noqa: BLE001 - connection may already be closed at shutdown
                pass

        def seq(m) -> tuple[str, int]:  # stream order within each lane
            try:
                return m.metadata.stream, m.metadata.sequence.stream
            except Exception:  # noqa: BLE001 - not a JetStream message (tests)
                return "", 0

        try:
            for m in sorted({id(m): m for m in [*held, *later]}.values(), key=seq):
                await m.nak()  # fetched but never settled: hand back at once
        except Exception:  # noqa: BLE001 - shutting down; unacked messages come back after ack_wait
            pass

    async def process(self, msgs: list) -> BatchResult:
        """Apply one fetched batch and settle every message.

        A store fault holds the batch here, retried with backoff, until the store takes
        it (or ``stop()``; the unsettled messages are then redelivered to the next writer).
        Any other failure of the apply is retried in place (``InPlaceRetry``). Returns one
        outcome per settled command and ``settled_msgs``, the messages settled: fewer than
        ``msgs`` when a stop ended the one-at-a-time step (the rest, and a bundle only part of
        which was applied, is unsettled and handed back).
        """
        try:
            return await self._process(msgs)
        finally:
            for m in msgs:
                self._in_hand.pop(id(m), None)

    async def _keep_alive(self) -> None:
        """Every ``ack_wait_s/6`` s, send an in-progress ack for each message in hand that has
        gone ``ack_wait_s/3`` s since its fetch or its last one (see the module docstring)."""
        due_s = self.settings.writer.ack_wait_s / 3
        while True:
            await asyncio.sleep(max(0.05, due_s / 2))
            now = time.monotonic()
            for entry in list(self._in_hand.values()):
                if now - entry[1] < due_s:
                    continue
                try:
                    await entry[0].in_progress()
                except nats.errors.MsgAlreadyAckdError:
                    continue  # settled meanwhile
                except Exception as exc:  # noqa: BLE001 - the next round tries again
                    log.debug("in-progress ack failed: %s", exc)
                    break
                entry[1] = now
                self.metrics.in_progress_acks.inc()

    async def _count_dead_letters(self) -> None:
        try:
            n = await self.thread.call(self.applier.open_dead_letters)
            self.metrics.dead_letters_open.set(n)
        except Exception as exc:  # noqa: BLE001 - a gauge sample, retried after the next batch
            log.debug("dead letters not counted: %s", exc)

    async def _process(self, msgs: list) -> BatchResult:
        items, owners = commands_of(msgs)
        t0 = time.perf_counter()
        result = await self._retry.run(items)
        self.faults.leave()
        took = time.perf_counter() - t0
        self.metrics.apply_seconds.observe(took)
        self.lanes.observe_cost(took, len(items))
        self.metrics.batch_size.observe(len(items))
        self.batches += 1
        await self.settlement.after_commit(items, result)
        done = len(result.outcomes)  # fewer than the commands when a stop ended the one-at-a-time step
        result.settled_msgs = settled_count(owners, done, len(msgs))
        unsettled = list(zip(msgs, settlements(result.outcomes, owners[:done], result.settled_msgs)))
        if not await self._retry.step(partial(self.settlement.settle_all, unsettled), "settling the batch's messages"):
            # Left to JetStream: redelivered after ack_wait_s and answered from ingest_keys.
            log.error("%d messages of a committed batch left unsettled", len(unsettled))
        if result.files:
            self.checkpoints.schedule()
        if any(o.dead_letter or o.op == "dead_letter.resolve" for o in result.outcomes):
            await self._count_dead_letters()
        if result.flush_fault is not None:
            self.faults.enter(result.flush_fault)
            await self.faults.recover_outbox()
            self.faults.leave()
            self.checkpoints.schedule()
        return result


    async def _poll_lag(self) -> None:
        while True:
            try:
                for lane, gauge in ((busmod.LIVE, self.metrics.pending), (busmod.BULK, self.metrics.bulk_pending)):
                    stream, durable, _ = busmod.LANES[lane]
                    info = await self.js.consumer_info(stream, durable, timeout=1.0)
                    gauge.set(int(info.num_pending or 0) + int(info.num_ack_pending or 0))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a missed sample is fine
                log.debug("consumer info failed: %s", exc)
            await asyncio.sleep(LAG_POLL_S)

    def stop(self) -> None:
        """Ask ``run()`` to return after the current batch."""
        self._stop.set()

