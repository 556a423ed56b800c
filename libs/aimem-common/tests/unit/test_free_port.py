"""free_port hands out ports a child can still bind: outside the kernel's ephemeral range, once."""

import socket

from aimem_common.natsserver import _ephemeral_range, free_port


def test_ports_come_from_below_the_ephemeral_range_and_are_bindable():
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert all(p < low or p > high for p in ports), ports
    for p in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_port_is_never_handed_out_twice():
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == 300


def test_blocks_are_consecutive_and_disjoint_from_earlier_ones():
    seen: set[int] = set()
    for _ in range(20):
        base = free_port(count=5)
        block = set(range(base, base + 5))
        assert not block & seen
        seen |= block
        socks = []
        try:
            for p in block:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
        finally:
            for s in socks:
                s.close()
