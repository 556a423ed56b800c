"""``aimem_writer.messages``: a bundle's commands and one settlement per message."""

from __future__ import annotations

from dataclasses import dataclass, field

from aimem_common.bus import BUNDLE_HEADER, encode_bundle

from aimem_writer.commands import Outcome
from aimem_writer.messages import command_count, commands_of, settlements, split_batch


@dataclass
class _Msg:  # the two attributes of a fetched message the writer reads here
    data: bytes
    headers: dict = field(default_factory=dict)


def test_a_bundle_becomes_its_commands_with_the_message_headers_minus_its_own() -> None:
    msgs = [_Msg(b'{"a":1}', {"Nats-Msg-Id": "x"}),
            _Msg(encode_bundle([b'{"b":1}', b'{"b":2}', b'{"b":3}']), {BUNDLE_HEADER: "3", "traceparent": "t"})]
    items, owners = commands_of(msgs)
    assert [i.data for i in items] == [b'{"a":1}', b'{"b":1}', b'{"b":2}', b'{"b":3}']
    assert owners == [0, 1, 1, 1]
    assert items[2].headers == {"traceparent": "t"}
    assert command_count(msgs) == 4
    assert command_count([_Msg(b"", {BUNDLE_HEADER: "junk"})]) == 1


def test_a_message_settles_by_the_weakest_of_its_commands() -> None:
    o = {a: Outcome(a) for a in ("ack", "nak", "term")}
    outcomes = [o["ack"], o["nak"], o["ack"], o["term"], o["ack"], o["term"], o["term"]]
    owners = [0, 0, 1, 1, 2, 3, 3]
    assert settlements(outcomes, owners, 5) == ["nak", "ack", "ack", "term", "ack"]


def test_a_bundle_cut_short_is_not_settled_nor_anything_after_it() -> None:
    from aimem_writer.messages import settled_count

    owners = [0, 1, 1, 1, 2]
    assert settled_count(owners, 5, 3) == 3
    assert settled_count(owners, 2, 3) == 1  # message 1 had one of its three commands applied
    assert settled_count(owners, 1, 3) == 1
    assert settled_count(owners, 0, 3) == 0
    acks = [Outcome("ack"), Outcome("ack")]
    assert settlements(acks, owners[:2], 1) == ["ack"]  # the applied part of message 1 is not settled


def _bundle(n: int) -> _Msg:
    return _Msg(encode_bundle([b'{"c":%d}' % i for i in range(n)]), {BUNDLE_HEADER: str(n)})


def test_a_batch_is_cut_at_the_command_budget_but_never_inside_a_bundle() -> None:
    msgs = [_Msg(b'{"a":1}'), _bundle(64), _bundle(64), _Msg(b'{"a":2}')]
    assert split_batch(msgs, 1) == (msgs[:1], msgs[1:])
    assert split_batch(msgs, 2) == (msgs[:2], msgs[2:])  # 65: the bundle that crosses it comes whole
    assert split_batch(msgs, 65) == (msgs[:2], msgs[2:])
    assert split_batch(msgs, 66) == (msgs[:3], msgs[3:])
    assert split_batch(msgs, 1000) == (msgs, [])
    big = [_bundle(64)]
    assert split_batch(big, 10) == (big, [])  # at least one message, whatever it carries
    assert split_batch([], 10) == ([], [])
