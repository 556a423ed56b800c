"""Post-commit settlement: what a committed batch owes, in order, before the next one.

A requested git checkpoint (its reply then carries the commit), the replies to waiting callers
(each sent once), the events on ``AIMEM_EVT``, then the acks (``nak`` with a delay for transient
failures, ``term`` for a dead letter). Each step is retried in place (``InPlaceRetry.step``);
the commit stands either way. Event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS

from aimem_common import bus as busmod
from aimem_common.errors import UnavailableError

from aimem_writer.batch import Applier
from aimem_writer.commands import BatchResult
from aimem_writer.gitcheckpoints import Checkpoints, vacuum
from aimem_writer.inplace import InPlaceRetry
from aimem_writer.ops.projects import VACUUM_PENDING
from aimem_writer.metrics import WriterMetrics
from aimem_writer.tx import Event

log = logging.getLogger("aimem.writer.consumer")

NAK_DELAY_S = 1.0


class Settlement:
    """Settles committed batches: checkpoint request, replies, events, acks.

    Args:
        nc: connected NATS client (replies, events).
        applier: the ``Applier`` (its wiki's head answers a checkpoint that was made twice).
        checkpoints: the git checkpoints.
        retry: the in-place retry of the consumer (its ``step``).
        metrics: writer metrics.
    """

    def __init__(self, nc: NATS, applier: Applier, checkpoints: Checkpoints, retry: InPlaceRetry,
                 metrics: WriterMetrics):
        self.nc = nc
        self.js = nc.jetstream()
        self.applier = applier
        self.checkpoints = checkpoints
        self.retry = retry
        self.metrics = metrics

    async def after_commit(self, items: list, result: BatchResult) -> None:
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
                message = next((o.reply["result"].get("message") for o in checkpoints
                                if o.reply["result"].get("message")), None)
                oid = await self.checkpoints.flush(message)
                if oid is None and tries[0] > 1:  # the failed attempt may have made the commit
                    oid = self.applier.wiki.head()
                for o in checkpoints:
                    o.reply["result"]["commit"] = oid

            if not await self.retry.step(checkpoint, "the requested git checkpoint"):
                err = UnavailableError("the git checkpoint failed; the wiki files stay on disk and a later"
                                       " checkpoint commits them")
                for o in checkpoints:
                    o.reply = busmod.reply_body(o.reply.get("cmd_id"), error=err)
        compacts = vacuum_requests(result.outcomes)
        if compacts:  # after COMMIT, before the reply
            done = await vacuum(self.checkpoints.thread, self.applier)
            for part in compacts:
                part["vacuum"] = done
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

        await self.retry.step(send_replies, "the replies")
        if result.events:
            await self.retry.step(partial(self.publish_events, result.events), "the events")

    async def settle_all(self, unsettled: list[tuple]) -> None:
        """Settle each ``(msg, action)`` of ``unsettled`` in order, removing it once done, so an
        attempt after a failure goes on from the message that failed.

        Raises:
            Exception: whatever ``settle`` raised (``unsettled`` then starts with that message).
        """
        while unsettled:
            msg, action = unsettled[0]
            try:
                await self.settle(msg, action)
            except nats.errors.MsgAlreadyAckdError:
                pass  # settled by an attempt whose error came after the publish
            unsettled.pop(0)
            self.metrics.acks.labels(action).inc()

    async def settle(self, msg, action: str) -> None:
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


def vacuum_requests(outcomes: list[Any]) -> list[dict[str, Any]]:
    """The parts of applied replies that ask for a VACUUM after the commit: ``db.compact``'s
    result, and the ``compact`` part of a purge or delete run with ``compact`` (``ops.projects.compact``
    answers ``vacuum: "pending"`` for each)."""
    parts = []
    for o in outcomes:
        result = (o.reply or {}).get("result") if o.reply and o.reply.get("ok") else None
        if not isinstance(result, dict):
            continue
        for part in (result, result.get("compact")):
            if isinstance(part, dict) and part.get("vacuum") == VACUUM_PENDING:
                parts.append(part)
    return parts
