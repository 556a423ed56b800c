"""The durable pull consumer: fetch → apply (writer thread) → replies/events → ack.

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
import json
import logging
import math
import time
from functools import partial

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.bundles import BUNDLE_VERSION, BUNDLES_STATUS_KEY
from aimem_common.config import Settings, WriterSettings
from aimem_common.errors import StoreFaultError, UnavailableError

from aimem_writer.batch import Applier
from aimem_writer.commands import BatchResult
from aimem_writer.inplace import InPlaceRetry
from aimem_writer.messages import command_count, commands_of, settled_count, settlements, split_batch
from aimem_writer.metrics import WriterMetrics
from aimem_writer.thread import WriterThread
from aimem_writer.tx import Event

log = logging.getLogger("aimem.writer.consumer")

NAK_DELAY_S = 1.0
LAG_POLL_S = 2.0
# How long a fetch waits on a lane that may have nothing: the live lane while an import keeps
# the bulk lane busy, and the bulk lane after an idle live fetch (seconds).
LANE_PROBE_S = 0.01
BULK_FIRST_SLICE = 32  # commands of the first bulk slice, before any command's cost is measured
BULK_MIN_SLICE = 8
COST_ALPHA = 0.3  # EWMA weight of the newest batch's apply seconds per command


def bulk_slice(cost_s: float | None, w: WriterSettings) -> int:
    """Commands of the bulk lane to take into one batch: as many as apply in about
    ``w.bulk_slice_ms`` at ``cost_s`` seconds per command (``BULK_FIRST_SLICE`` before any is
    measured), between ``BULK_MIN_SLICE`` and ``w.bulk_batch_max_msgs``."""
    if not cost_s:
        return min(BULK_FIRST_SLICE, w.bulk_batch_max_msgs)
    return max(BULK_MIN_SLICE, min(w.bulk_batch_max_msgs, int(w.bulk_slice_ms / 1000 / cost_s)))


def _behind(msgs: list) -> bool:
    """Whether the last fetched message of ``msgs`` says the consumer had more commands pending
    (its JetStream ``num_pending``)."""
    try:
        return bool(msgs[-1].metadata.num_pending)
    except Exception:  # noqa: BLE001 - no message, or not a JetStream message (tests)
        return False


def command_budget(msgs: list, w: WriterSettings) -> int:
    """Commands a batch taken from ``msgs`` (in hand, in order) may hold: behind,
    ``w.batch_max_msgs_behind``, else ``w.batch_max_msgs``. Behind: the consumer still had
    commands pending after the last of them (``num_pending``), or they carry more than one
    ``w.batch_max_msgs`` batch themselves (a fetch of bundles brings more than it asked for)."""
    behind = _behind(msgs) or command_count(msgs) > w.batch_max_msgs
    return max(w.batch_max_msgs, w.batch_max_msgs_behind) if behind else w.batch_max_msgs


def fetch_size(msgs: list, w: WriterSettings) -> int:
    """Messages to ask for next: room for ``command_budget(msgs, w)`` commands divided by the
    commands per message of ``msgs`` (bundles of gathered hooks), so a transaction stays about
    that many commands (``split_batch`` cuts what a fetch brings beyond it)."""
    per_msg = command_count(msgs) / len(msgs) if msgs else 1.0
    return max(1, int(command_budget(msgs, w) / per_msg))


def first_fetch_size(settings: Settings) -> int:
    """Messages to ask for when nothing says how many commands a message carries (at the start,
    after an idle fetch): ``writer.batch_max_msgs`` commands in messages of the worst case,
    full bundles of ``ingress.bundle_max_cmds`` commands. Lone commands then make one small
    batch, and the prefetch behind it is sized by what they carried (``fetch_size``)."""
    return max(1, settings.writer.batch_max_msgs // max(1, settings.ingress.bundle_max_cmds))


# The linger starts only when the commands' arrival rate promises this many more within it:
# a lone hook after a quiet spell is applied at once (visible in a few ms), a stream of them
# is gathered.
LINGER_MIN_EXPECTED = 2.0
ARRIVAL_WINDOW_S = 0.5  # the time constant of the arrival rate (it forgets a burst within a few)


class ArrivalRate:
    """Commands per second reaching the writer over about the last ``ARRIVAL_WINDOW_S``: an
    exponentially decaying count (each fetched batch adds its size; the count fades with
    time, so a quiet spell brings the rate to zero whatever came before)."""

    def __init__(self) -> None:
        self.per_s = 0.0
        self._at: float | None = None

    def observe(self, n: int, now: float) -> None:
        """Fold a fetched batch of ``n`` commands at ``now`` (monotonic s) into the rate."""
        if self._at is not None:
            self.per_s *= math.exp(-max(0.0, now - self._at) / ARRIVAL_WINDOW_S)
        self.per_s += n / ARRIVAL_WINDOW_S
        self._at = now


def lingers(msgs: list, w: WriterSettings) -> bool:
    """Whether to wait for more commands before applying ``msgs``: a batch of fewer than
    ``w.batch_linger_msgs`` commands (a bundle counts its own) that nobody waits on (no ``Aimem-Reply-To``: hook observations,
    session ends) while ``w.batch_linger_ms`` is on. A waiting caller is never held."""
    return (w.batch_linger_ms > 0 and 0 < command_count(msgs) < w.batch_linger_msgs
            and not any((m.headers or {}).get(busmod.REPLY_HEADER) for m in msgs))


class Consumer:
    """Runs the ``writer`` durable consumer until ``stop()``.

    Args:
        settings: writer settings (batch size, fetch timeout, debounce).
        nc: connected NATS client.
        thread: the writer thread.
        applier: the ``Applier`` living on that thread.
        metrics: writer metrics.
    """

    def __init__(self, settings: Settings, nc: NATS, thread: WriterThread, applier: Applier, metrics: WriterMetrics):
        self.settings = settings
        self.bulk_busy = False  # the last bulk fetch brought commands: the live lane is only probed
        self.cost_s: float | None = None  # apply seconds per command (EWMA): sizes the bulk slices
        self._bulk_probed_at = 0.0  # monotonic s of the last look at an idle bulk lane
        self.nc = nc
        self.js = nc.jetstream()
        self.thread = thread
        self.applier = applier
        self.metrics = metrics
        self._stop = asyncio.Event()
        self._ckpt_task: asyncio.Task | None = None
        self._ckpt_pending = False
        self.ready = asyncio.Event()
        self.batches = 0
        self.arrivals = ArrivalRate()
        self._prefetch: asyncio.Task | None = None  # the next fetch, in flight while a batch is applied
        self._held: list = []  # the batch fetched and not yet settled (handed back at a stop)
        self.fault: StoreFaultError | None = None  # set while the store refuses writes
        self.fault_since: float | None = None  # epoch s
        # id(msg) → [msg, monotonic s of its fetch or last in-progress ack]: fetched, not yet settled
        self._in_hand: dict[int, list] = {}
        self._retry = InPlaceRetry(partial(self._holding, applier.apply), partial(self._holding, applier.give_up),
                                   settings.writer.max_deliver, self._stop, metrics.batch_failures)

    async def run(self) -> None:
        """Fetch and apply batches until ``stop()``; never raises on transient NATS errors."""
        w = self.settings.writer
        sub = await self.js.pull_subscribe_bind(durable=busmod.WRITER_DURABLE, stream=busmod.MUT_STREAM)
        bulk_sub = await self.js.pull_subscribe_bind(durable=busmod.BULK_DURABLE, stream=busmod.BULK_STREAM)
        side = [asyncio.create_task(self._poll_lag(), name="writer-lag"),
                asyncio.create_task(self._keep_alive(), name="writer-in-progress"),
                asyncio.create_task(self._announce(), name="writer-status")]
        await self._count_dead_letters()
        self.ready.set()

        async def fetch_one(lane_sub, size: int, timeout_s: float) -> list:
            try:
                msgs = await lane_sub.fetch(size, timeout=timeout_s)
                now = time.monotonic()
                self._in_hand.update((id(m), [m, now]) for m in msgs)
                return msgs
            except (nats.errors.TimeoutError, asyncio.TimeoutError):
                return []  # idle (nats-py raises either one from a partial fetch)
            except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
                    nats.js.errors.APIError, nats.errors.Error) as exc:
                log.warning("fetch failed: %s; retrying", exc)
                await asyncio.sleep(0.5)
                return []

        async def fetch(size: int) -> list:
            return await self.fetch_lanes(partial(fetch_one, sub), partial(fetch_one, bulk_sub), size)

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

    async def fetch_lanes(self, live, bulk, size: int) -> list:
        """Fetch up to ``size`` messages, live first: ``live(size, timeout_s)`` and, only when it
        left nothing pending on the live lane, a ``bulk_slice`` more from ``bulk(n, timeout_s)``;
        returns the live messages then the bulk ones (each lane in its stream order).

        While the bulk lane is busy the live lane is only probed (``LANE_PROBE_S``) instead of
        waited on for ``writer.fetch_timeout_s``; an idle bulk lane is probed after an idle live
        fetch, and after a live one at most once a ``fetch_timeout_s`` (each probe of an empty
        lane waits ``LANE_PROBE_S``, which a trickle of live batches should not pay every time),
        so an import starts within about ``fetch_timeout_s`` and then runs at the writer's pace. Event loop; the messages are in hand (``_in_hand``) once returned.
        """
        w = self.settings.writer
        msgs = await live(size, LANE_PROBE_S if self.bulk_busy else w.fetch_timeout_s)
        if msgs and (_behind(msgs) or len(msgs) >= size):
            return msgs  # live commands still pending: they go first, the bulk lane waits
        now = time.monotonic()
        if msgs and not self.bulk_busy and now - self._bulk_probed_at < w.fetch_timeout_s:
            return msgs  # an idle bulk lane is looked at about once a fetch_timeout_s, not per live batch
        self._bulk_probed_at = now
        more = await bulk(bulk_slice(self.cost_s, w), LANE_PROBE_S)
        self.bulk_busy = bool(more)
        return msgs + more

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

    async def _holding(self, fn, *args):
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
                self._enter_fault(fault)
                if self._stop.is_set():
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.writer.store_retry_max_s)
                continue
            return result

    async def _recover_outbox(self) -> None:
        """After a post-commit flush fault: re-flush the owed wiki files until the disk takes them."""
        delay = 0.25
        while not self._stop.is_set():
            try:
                await self.thread.call(self.applier.recover)
                return
            except StoreFaultError as fault:
                self._enter_fault(fault)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.settings.writer.store_retry_max_s)

    def _enter_fault(self, fault: StoreFaultError) -> None:
        reason = (fault.data or {}).get("reason", "io_error")
        if self.fault is None:
            self.fault_since = time.time()
            log.error("store fault (%s), holding the batch and retrying: %s", reason, fault.message)
            self.metrics.store_faults.labels(reason).inc()
            self.metrics.store_fault.labels(reason).set(1)
            asyncio.get_running_loop().create_task(self._publish_status())
        self.fault = fault

    def _leave_fault(self) -> None:
        if self.fault is None:
            return
        reason = (self.fault.data or {}).get("reason", "io_error")
        log.warning("store accepts writes again after %.1f s (%s)", time.time() - (self.fault_since or 0), reason)
        self.metrics.store_fault.labels(reason).set(0)
        self.fault = self.fault_since = None
        asyncio.get_running_loop().create_task(self._publish_status())

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

    async def _publish_status(self) -> None:
        try:
            await self.nc.publish(busmod.WRITER_STATUS_SUBJECT, json.dumps(self.status()).encode())
        except nats.errors.Error as exc:
            log.debug("status not announced: %s", exc)

    async def _announce(self) -> None:
        while True:
            await self._publish_status()
            await asyncio.sleep(self.settings.writer.status_interval_s)

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
        self._leave_fault()
        took = time.perf_counter() - t0
        self.metrics.apply_seconds.observe(took)
        if items:
            cost = took / len(items)
            self.cost_s = cost if self.cost_s is None else COST_ALPHA * cost + (1 - COST_ALPHA) * self.cost_s
        self.metrics.batch_size.observe(len(items))
        self.batches += 1
        await self._after_commit(items, result)
        done = len(result.outcomes)  # fewer than the commands when a stop ended the one-at-a-time step
        result.settled_msgs = settled_count(owners, done, len(msgs))
        unsettled = list(zip(msgs, settlements(result.outcomes, owners[:done], result.settled_msgs)))
        if not await self._retry.step(partial(self._settle_all, unsettled), "settling the batch's messages"):
            # Left to JetStream: redelivered after ack_wait_s and answered from ingest_keys.
            log.error("%d messages of a committed batch left unsettled", len(unsettled))
        if result.files:
            self.schedule_checkpoint()
        if any(o.dead_letter or o.op == "dead_letter.resolve" for o in result.outcomes):
            await self._count_dead_letters()
        if result.flush_fault is not None:
            self._enter_fault(result.flush_fault)
            await self._recover_outbox()
            self._leave_fault()
            self.schedule_checkpoint()
        return result

    async def _after_commit(self, items: list, result: BatchResult) -> None:
        """Run the steps between a committed batch and its acks, each retried in place and
        given up after ``writer.max_deliver`` attempts (``InPlaceRetry.step``; the commit stands
        either way): a requested git checkpoint (its reply then carries the commit, or an
        ``unavailable`` error when it was given up), the replies to waiting callers (each sent
        once), the events. Event loop; publishes on NATS, commits to git (writer thread)."""
        checkpoints = [o for o in result.outcomes if o.op == "wiki.checkpoint" and o.reply and o.reply.get("ok")]
        if checkpoints:
            # Requested checkpoint (admin backup): commit before answering, not after the debounce.
            tries = [0]

            async def checkpoint() -> None:
                tries[0] += 1
                oid = await self.flush_checkpoint()
                if oid is None and tries[0] > 1:  # the failed attempt may have made the commit
                    oid = self.applier.wiki.head()
                for o in checkpoints:
                    o.reply["result"]["commit"] = oid

            if not await self._retry.step(checkpoint, "the requested git checkpoint"):
                err = UnavailableError("the git checkpoint failed; the wiki files stay on disk and a later"
                                       " checkpoint commits them")
                for o in checkpoints:
                    o.reply = busmod.reply_body(o.reply.get("cmd_id"), error=err)
        replies = [(item.headers[busmod.REPLY_HEADER], outcome.reply) for item, outcome in zip(items, result.outcomes)
                   if item.headers.get(busmod.REPLY_HEADER) and outcome.reply is not None]
        sent = [0]

        async def send_replies() -> None:
            while sent[0] < len(replies):  # a retry goes on from the first reply not sent
                reply_to, body = replies[sent[0]]
                try:
                    await self.nc.publish(reply_to, json.dumps(body, ensure_ascii=False).encode())
                except nats.errors.Error as exc:  # the connection refused it: that caller times out
                    log.warning("reply to %s failed: %s", reply_to, exc)
                sent[0] += 1

        await self._retry.step(send_replies, "the replies")
        if result.events:
            await self._retry.step(partial(self.publish_events, result.events), "the events")

    async def _settle_all(self, unsettled: list[tuple]) -> None:
        """Settle each ``(msg, action)`` of ``unsettled`` in order, removing it once done, so an
        attempt after a failure goes on from the message that failed.

        Raises:
            Exception: whatever ``_settle`` raised (``unsettled`` then starts with that message).
        """
        while unsettled:
            msg, action = unsettled[0]
            try:
                await self._settle(msg, action)
            except nats.errors.MsgAlreadyAckdError:
                pass  # settled by an attempt whose error came after the publish
            unsettled.pop(0)
            self.metrics.acks.labels(action).inc()

    async def _settle(self, msg, action: str) -> None:
        """``ack``, ``nak`` (redelivered after ``NAK_DELAY_S``) or ``term`` one message.

        Raises:
            nats.errors.Error: the settlement was not published (e.g. the connection is closed).
        """
        if action == "ack":
            await msg.ack()
        elif action == "nak":
            await msg.nak(delay=NAK_DELAY_S)
        else:
            await msg.term()

    async def publish_events(self, events: list[Event]) -> None:
        """Publish committed events on ``aimem.evt.<kind>``, concurrently; a failed publish is
        logged and dropped (events are advisory, the commit stands). The watcher's hand-edit
        indexing calls it too. A batch's observation events go out one per session
        (``coalesce_events``)."""
        events = coalesce_events(events)

        async def one(ev: Event) -> None:
            try:
                await self.js.publish(busmod.evt_subject(ev.kind), json.dumps(ev.data, ensure_ascii=False).encode(),
                                      timeout=2.0, headers=busmod.trace_headers())
            except Exception as exc:  # noqa: BLE001 - events are advisory; the commit stands
                log.warning("event %s not published: %s", ev.kind, exc)

        await asyncio.gather(*(one(e) for e in events))

    # -- checkpoints ------------------------------------------------------------------
    def schedule_checkpoint(self) -> None:
        """Schedule a git checkpoint after the debounce (no-op when one is pending)."""
        if self._ckpt_pending:
            return
        self._ckpt_pending = True
        self._ckpt_task = asyncio.create_task(self._checkpoint_later(), name="writer-checkpoint")

    async def _checkpoint_later(self) -> None:
        try:
            await asyncio.sleep(self.settings.writer.git_debounce_ms / 1000)
        finally:
            self._ckpt_pending = False
        try:
            await self.thread.call(self.applier.checkpoint)
        except Exception:  # noqa: BLE001 - retried with the next batch's checkpoint
            log.exception("git checkpoint failed")

    async def flush_checkpoint(self) -> str | None:
        """Run any pending checkpoint now (shutdown, admin backup); return the commit id or None."""
        if self._ckpt_task and not self._ckpt_task.done():
            self._ckpt_task.cancel()
            try:
                await self._ckpt_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        self._ckpt_pending = False
        return await self.thread.call(self.applier.checkpoint)

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


def coalesce_events(events: list[Event]) -> list[Event]:
    """Merge a batch's ``observations.appended`` events into one per (workspace, project, session).

    The hook path appends thousands of observations a second; live views only need to know
    that a session grew (``count`` summed, highest ``last_observation_id``, ``kinds`` in
    first-seen order). Other events pass through in order.
    """
    out: list[Event] = []
    merged: dict[tuple, Event] = {}
    for ev in events:
        if ev.kind != "observations.appended":
            out.append(ev)
            continue
        key = (ev.data.get("workspace"), ev.data.get("project"), ev.data.get("session_id"))
        first = merged.get(key)
        if first is None:
            merged[key] = ev = Event(ev.kind, {**ev.data, "kinds": list(ev.data.get("kinds", []))})
            out.append(ev)
            continue
        first.data["count"] += ev.data.get("count", 1)
        first.data["last_observation_id"] = max(first.data["last_observation_id"], ev.data["last_observation_id"])
        for k in ev.data.get("kinds", []):
            if k not in first.data["kinds"]:
                first.data["kinds"].append(k)
    return out
