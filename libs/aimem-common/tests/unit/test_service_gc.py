"""``service.freeze_after_startup``: the start-up heap is frozen out of collections, once the
service has started, and start-up garbage is freed first (not pinned for the process's life)."""

from __future__ import annotations

import gc
import weakref
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI

from aimem_common.service import freeze_after_startup
from aimem_common.telemetry import Telemetry

pytestmark = [pytest.mark.asyncio]


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the collector frees it


async def test_freeze_after_startup_freezes_what_start_up_left_alive_and_frees_its_garbage() -> None:
    seen: dict[str, int] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        seen["during_start"] = gc.get_freeze_count()
        app.state.part = [object() for _ in range(1000)]  # built by start-up, alive while serving
        yield

    garbage = _Node()
    dead = weakref.ref(garbage)
    del garbage
    gc.unfreeze()
    try:
        app = freeze_after_startup(FastAPI(lifespan=lifespan))
        async with app.router.lifespan_context(app):
            frozen = gc.get_freeze_count()
            assert seen["during_start"] == 0  # frozen after the service's own start-up, not before
            assert frozen > 10_000, frozen  # the modules, the app, what start-up built
            assert dead() is None  # start-up garbage was collected before the freeze
            # /metrics reads the same count (a frozen object freed since by its last reference leaves it)
            assert frozen - 1000 < Telemetry("test").registry.get_sample_value("aimem_gc_frozen_objects") <= frozen
    finally:
        gc.unfreeze()
