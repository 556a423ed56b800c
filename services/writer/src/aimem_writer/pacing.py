"""Fetching and pacing: how much to fetch from which lane, when to linger, and the lanes' fetch.

Live first (DESIGN.md "Hook ingress"): the writer has two durables, ``writer`` on ``AIMEM_MUT``
(live hooks, MCP and admin writes) and ``writer-bulk`` on ``AIMEM_BULK`` (imports). Each fetch
takes the live lane first; only when that left nothing pending does it add a slice of the
bulk lane sized to apply in about ``writer.bulk_slice_ms`` (``bulk_slice``). Event loop.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

import nats.errors
import nats.js.errors

from aimem_common import bus as busmod
from aimem_common.config import Settings, WriterSettings

from aimem_writer.messages import command_count

log = logging.getLogger("aimem.writer.pacing")

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


def has_pending(msgs: list) -> bool:
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
    behind = has_pending(msgs) or command_count(msgs) > w.batch_max_msgs
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


class Lanes:
    """Fetches from the two lanes, live first, and paces the bulk lane by the measured cost of
    a command. Event loop.

    Args:
        settings: the writer's settings.
        in_hand: ``id(msg) -> [msg, monotonic s of its fetch]``, updated with every fetched message.
    """

    def __init__(self, settings: Settings, in_hand: dict[int, list]):
        self.settings = settings
        self.in_hand = in_hand
        self.bulk_busy = False  # the last bulk fetch brought commands: the live lane is only probed
        self.cost_s: float | None = None  # apply seconds per command (EWMA): sizes the bulk slices
        self._bulk_probed_at = 0.0  # monotonic s of the last look at an idle bulk lane

    def observe_cost(self, took_s: float, commands: int) -> None:
        """Fold a batch of ``commands`` applied in ``took_s`` seconds into ``cost_s`` (EWMA)."""
        if commands:
            cost = took_s / commands
            self.cost_s = cost if self.cost_s is None else COST_ALPHA * cost + (1 - COST_ALPHA) * self.cost_s

    async def fetch_one(self, lane_sub, size: int, timeout_s: float) -> list:
        """Fetch up to ``size`` messages of one lane's pull subscription (``[]`` when idle or on
        a transient NATS error); the messages are in hand once returned."""
        try:
            msgs = await lane_sub.fetch(size, timeout=timeout_s)
            now = time.monotonic()
            self.in_hand.update((id(m), [m, now]) for m in msgs)
            return msgs
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            return []  # idle (nats-py raises either one from a partial fetch)
        except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
                nats.js.errors.APIError, nats.errors.Error) as exc:
            log.warning("fetch failed: %s; retrying", exc)
            await asyncio.sleep(0.5)
            return []

    async def fetch_lanes(self, live, bulk, size: int) -> list:
        """Fetch up to ``size`` messages, live first: ``live(size, timeout_s)`` and, only when it
        left nothing pending on the live lane, a ``bulk_slice`` more from ``bulk(n, timeout_s)``;
        returns the live messages then the bulk ones (each lane in its stream order).

        While the bulk lane is busy the live lane is only probed (``LANE_PROBE_S``) instead of
        waited on for ``writer.fetch_timeout_s``; an idle bulk lane is probed after an idle live
        fetch, and after a live one at most once a ``fetch_timeout_s`` (each probe of an empty
        lane waits ``LANE_PROBE_S``, which a trickle of live batches should not pay every time),
        so an import starts within about ``fetch_timeout_s`` and then runs at the writer's pace. Event loop; the messages are in hand (``in_hand``) once returned.
        """
        w = self.settings.writer
        msgs = await live(size, LANE_PROBE_S if self.bulk_busy else w.fetch_timeout_s)
        if msgs and (has_pending(msgs) or len(msgs) >= size):
            return msgs  # live commands still pending: they go first, the bulk lane waits
        now = time.monotonic()
        if msgs and not self.bulk_busy and now - self._bulk_probed_at < w.fetch_timeout_s:
            return msgs  # an idle bulk lane is looked at about once a fetch_timeout_s, not per live batch
        self._bulk_probed_at = now
        more = await bulk(bulk_slice(self.cost_s, w), LANE_PROBE_S)
        self.bulk_busy = bool(more)
        return msgs + more
