"""Real service processes freeze their start-up heap out of garbage collection (the runner's
``freeze_after_startup``): the writer, and each worker of an ingress run with two."""

from __future__ import annotations

import httpx
import pytest

pytestmark = [pytest.mark.integration]


def _frozen(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return next(float(line.split()[1]) for line in text.splitlines() if line.startswith("aimem_gc_frozen_objects "))


def test_service_processes_freeze_their_start_up_heap(services) -> None:
    procs = services("writer")
    procs |= services("ingress", extra_env={"AIMEM_INGRESS__WORKERS": "2"})
    assert _frozen(procs["writer"].url) > 10_000
    # Several reads: the two ingress workers share the port, each answers some.
    readings = [_frozen(procs["ingress"].url) for _ in range(8)]
    assert min(readings) > 10_000, readings
