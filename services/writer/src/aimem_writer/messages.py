"""Fetched JetStream messages as the commands they carry, and back to one settlement each.

A message holds one command, or a bundle of gathered hook commands (``aimem_common.bundles``:
header ``Aimem-Bundle``, one envelope per line). ``commands_of`` turns a fetched batch
into ``Incoming`` items (a bundle's commands in their order, each with the message's
headers and delivery count) and the index of the message each came from; ``settlements``
folds the items' outcomes back into one action per message:

* ``nak`` when any of its commands is to be redelivered: the message comes back whole, and
  the commands already applied answer from ``ingest_keys`` then (each bundled command is
  keyed by its idempotency key or cmd id), so nothing is applied twice;
* else ``term`` when every command of it was given up (each is a dead letter already);
* else ``ack``.

``split_batch`` cuts what was fetched at the writer's command budget: a fetch is sized in
messages, and a message may carry one command or a whole bundle.
"""

from __future__ import annotations

from aimem_common.bus import BUNDLE_HEADER, split_bundle

from aimem_writer.commands import Incoming, Outcome


def commands_of(msgs: list) -> tuple[list[Incoming], list[int]]:
    """Return ``(items, owners)``: one ``Incoming`` per command, ``owners[i]`` the index in
    ``msgs`` of the message item ``i`` came from (same length as ``items``)."""
    items: list[Incoming] = []
    owners: list[int] = []
    for n, m in enumerate(msgs):
        try:
            delivered = m.metadata.num_delivered
        except Exception:  # noqa: BLE001 - not a JetStream message (tests)
            delivered = 1
        headers = dict(m.headers or {})
        if headers.pop(BUNDLE_HEADER, None) is None:
            items.append(Incoming(m.data, headers, delivered))
            owners.append(n)
            continue
        for part in split_bundle(m.data):
            items.append(Incoming(part, headers, delivered))
            owners.append(n)
    return items, owners


def command_count(msgs: list) -> int:
    """Commands carried by ``msgs`` (a bundle counts its commands; a bad count as one)."""
    total = 0
    for m in msgs:
        size = (m.headers or {}).get(BUNDLE_HEADER)
        total += int(size) if size and size.isdigit() else 1
    return total


def split_batch(msgs: list, budget: int) -> tuple[list, list]:
    """Return ``(batch, rest)``: the shortest prefix of ``msgs`` that carries ``budget`` commands
    (``command_count``; all of ``msgs`` when they carry fewer), at least one message, and the
    messages after it, in order. The batch passes ``budget`` by less than its last message's
    commands (a bundle is never cut)."""
    total = 0
    for n, m in enumerate(msgs):
        total += command_count([m])
        if total >= budget:
            return msgs[:n + 1], msgs[n + 1:]
    return msgs, []


def settled_count(owners: list[int], done: int, count: int) -> int:
    """Messages of ``count`` whose every command has an outcome when the first ``done``
    commands have one (``owners`` as from ``commands_of``, nondecreasing): a bundle cut
    short is not settled, nor anything after it."""
    return owners[done] if done < len(owners) else count


def settlements(outcomes: list[Outcome], owners: list[int], count: int) -> list[str]:
    """Return one action (``ack``/``nak``/``term``) for each of the first ``count`` messages from
    their commands' ``outcomes`` (``owners`` as from ``commands_of``); a message with no
    command is acked; outcomes of later messages are ignored."""
    actions: list[set[str]] = [set() for _ in range(count)]
    for outcome, n in zip(outcomes, owners):
        if n < count:  # a bundle cut short (``settled_count``) is left unsettled
            actions[n].add(outcome.action)
    out = []
    for seen in actions:
        if "nak" in seen:
            out.append("nak")
        elif seen == {"term"}:
            out.append("term")
        else:
            out.append("ack")
    return out
