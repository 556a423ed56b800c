"""Hook commands gathered into bundles: one JetStream message, one PubAck for several hooks.

Concurrent hooks (a team of agents, subagents fanning out, a burst after a reconnect) each
cost a JetStream publish and a PubAck round trip at the ingress, a stored message and an
ack at the server, and a message to fetch and ack at the writer. ``Gatherer`` sends the
fire-and-forget commands that are waiting for a publish at the same moment as one message:

* subject ``aimem.mut.bundle`` (inside the ``AIMEM_MUT`` filter), header ``Aimem-Bundle``
  = the number of commands, body = the envelopes' JSON one per line (JSON text never holds
  a raw newline, so a line is one envelope);
* every caller waits for the bundle's PubAck: a 202 still means "stored in JetStream";
* a bundle is never a duplicate in JetStream's window (its ``Nats-Msg-Id`` is unique); a
  retried command is still applied once, by the writer's ``ingest_keys`` (keyed by the
  command's idempotency key or cmd id), so the 202 of a retry merely does not say
  ``duplicate``;
* the writer splits a bundle back into its commands (``split_bundle``) and settles the
  message once all of them are applied.

Gathering adds no wait of its own: a command submitted while nothing is in flight leaves
on the next event-loop turn, with whatever was submitted in the same turn; while
``max_inflight`` publishes await their PubAck, new commands gather until one returns (or
until ``max_cmds`` / ``max_bytes`` fill a bundle). A command travelling alone is published
as before (its own subject and ``Nats-Msg-Id``, so JetStream still reports duplicates), and
so is every command while the writer has not announced that it reads bundles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from aimem_common.bus import Bus
from aimem_common.commands import Envelope


@dataclass(slots=True)
class _Waiting:
    env: Envelope
    data: bytes
    done: asyncio.Future = field(repr=False)


class Gatherer:
    """Publish fire-and-forget commands through ``bus``, several at once as one bundle.

    Args:
        bus: the service's ``aimem_common.bus.Bus`` (its ``publish`` and ``publish_bundle``).
        max_cmds: commands per bundle (≥ 1; 1 turns gathering off).
        max_bytes: JSON bytes per bundle (below the stream's ``max_msg_size``).
        max_inflight: bundles (or lone commands) awaiting their PubAck before new commands
            wait for one to return.
        enabled: returns whether bundles may be sent now (the writer said it reads them);
            None: always.

    Runs on the event loop; ``publish`` is the only entry point.
    """

    def __init__(self, bus: Bus, *, max_cmds: int, max_bytes: int, max_inflight: int,
                 enabled: Callable[[], bool] | None = None):
        self.bus = bus
        self.enabled = enabled
        self.max_cmds = max(1, max_cmds)
        self.max_bytes = max_bytes
        self.max_inflight = max(1, max_inflight)
        self._pending: list[_Waiting] = []
        self._pending_bytes = 0
        self._inflight = 0
        self._scheduled = False
        self._sending: set[asyncio.Task] = set()  # held: the loop keeps only weak references to tasks

    async def publish(self, env: Envelope):
        """Publish ``env`` (no caller waits on the writer) and return its ``PublishResult``
        once the message holding it is stored.

        Raises:
            BackPressureError / UnavailableError: as ``Bus.publish``, for every command of
                the bundle that failed (none of them is acknowledged).
        """
        if self.max_cmds == 1 or (self.enabled is not None and not self.enabled()):
            return await self.bus.publish(env)
        data = env.model_dump_json().encode()
        if len(data) >= self.max_bytes:
            return await self.bus.publish(env)  # too large to share a message
        waiting = _Waiting(env, data, asyncio.get_running_loop().create_future())
        if self._pending_bytes + len(data) > self.max_bytes:
            self._launch()  # the next one would overflow: send what is gathered first
        self._pending.append(waiting)
        self._pending_bytes += len(data)
        if len(self._pending) >= self.max_cmds:
            self._launch()
        elif not self._scheduled and self._inflight < self.max_inflight:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._on_turn)
        return await waiting.done

    def _on_turn(self) -> None:
        self._scheduled = False
        if self._inflight < self.max_inflight:
            self._launch()

    def _launch(self) -> None:
        if not self._pending:
            return
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        self._inflight += 1
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[_Waiting]) -> None:
        try:
            if len(batch) == 1:
                result = await self.bus.publish(batch[0].env)
            else:
                result = await self.bus.publish_bundle([w.env for w in batch], [w.data for w in batch])
        except BaseException as exc:  # noqa: BLE001 - every waiter gets the failure
            for w in batch:
                if not w.done.done():
                    w.done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for w in batch:
                if not w.done.done():
                    w.done.set_result(result)
        finally:
            self._inflight -= 1
            if self._pending and not self._scheduled:
                self._launch()  # what gathered while this one was in flight
