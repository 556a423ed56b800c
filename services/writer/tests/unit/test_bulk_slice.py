"""How large a slice of the bulk lane (imports) the writer takes into a batch (``pacing.bulk_slice``)."""

from __future__ import annotations

from aimem_common.config import WriterSettings
from aimem_writer.pacing import BULK_FIRST_SLICE, BULK_MIN_SLICE, bulk_slice


def test_bulk_slices_are_sized_by_the_measured_cost() -> None:
    w = WriterSettings(bulk_slice_ms=100.0, bulk_batch_max_msgs=512)
    assert bulk_slice(None, w) == BULK_FIRST_SLICE  # nothing measured yet: a small first slice
    assert bulk_slice(0.001, w) == 100  # 1 ms a command: 100 in 100 ms
    assert bulk_slice(0.00001, w) == 512  # cheap: capped
    assert bulk_slice(1.0, w) == BULK_MIN_SLICE  # dear: never starved to nothing
