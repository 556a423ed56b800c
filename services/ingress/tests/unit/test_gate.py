"""The lag gate's time bound: a stalled writer with work pending is behind by how long it stalled."""

from __future__ import annotations

import pytest

from aimem_common.bus import WriterProgress
from aimem_common.errors import BackPressureError, InsufficientStorageError
from aimem_ingress.gate import LagGate


async def _never():  # the gate is fed by observe() here
    raise AssertionError


def _gate(**kw) -> LagGate:
    return LagGate(_never, max_lag=100_000, max_delay_s=5.0, interval_s=1.0, retry_after_s=2, **kw)


def test_a_stalled_writer_trips_the_time_bound_and_a_moving_one_does_not() -> None:
    g = _gate()
    g.observe(WriterProgress(0, 100), 0.0)
    for t in range(1, 5):  # 50 commands/s applied, 20 pending: 0.4 s behind
        g.observe(WriterProgress(20, 100 + 50 * t), float(t))
        g.check()
    assert g.rate == pytest.approx(50, rel=0.01) and g.delay_s < 1
    for t in range(5, 12):  # stopped: the ack floor does not move
        g.observe(WriterProgress(20 + 50 * (t - 4), 300), float(t))
    assert g.delay_s >= 5
    with pytest.raises(BackPressureError) as info:
        g.check()
    assert info.value.retry_after_s == 2 and info.value.data["writer_lag"] == 370


def test_work_arriving_after_idle_is_not_a_stall() -> None:
    g = _gate()
    g.observe(WriterProgress(0, 100), 0.0)
    g.observe(WriterProgress(0, 100), 60.0)  # idle a minute
    g.observe(WriterProgress(30, 100), 61.0)  # a burst arrives
    assert g.delay_s < 5
    g.check()


class _Msg:
    def __init__(self, data: bytes):
        self.data = data


@pytest.mark.asyncio
async def test_a_store_fault_announcement_is_507_while_fresh() -> None:
    g = _gate(status_stale_s=5.0)
    await g.on_writer_status(_Msg(b'{"state": "store_fault", "reason": "disk_full", "retry_after_s": 5}'))
    with pytest.raises(InsufficientStorageError) as info:
        g.check()
    assert info.value.status == 507 and info.value.retry_after_s == 5
    await g.on_writer_status(_Msg(b'{"state": "ok"}'))
    g.check()
