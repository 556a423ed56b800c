"""The maintainer request/reply contract (aimem_common.maint_rpc) on a real nats-server."""

from __future__ import annotations

import asyncio

import pytest

from aimem_common import maint_rpc
from aimem_common.bus import make_reply
from aimem_common.errors import BadRequestError, BusTimeoutError, UnavailableError

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_call_round_trip_and_errors(bus):
    nc = bus.nc
    seen = []

    async def handler(msg):
        req = maint_rpc.parse_request(msg.data)
        seen.append((req, msg.headers))
        if req["args"].get("fail"):
            await msg.respond(make_reply(error=BadRequestError("lint needs a project", code="bad_request")))
        else:
            await msg.respond(make_reply(result={"echo": req["args"], "project": req["project"]}))

    await nc.subscribe(maint_rpc.subject("lint"), queue=maint_rpc.QUEUE_GROUP, cb=handler)
    res = await maint_rpc.call(nc, "lint", workspace="w", project="p", actor="ann", args={"llm": False}, timeout_s=2)
    assert res == {"echo": {"llm": False}, "project": "p"}
    assert seen[0][0] == {"workspace": "w", "project": "p", "actor": "ann", "args": {"llm": False}}
    with pytest.raises(BadRequestError):
        await maint_rpc.call(nc, "lint", workspace="w", project="p", actor="ann", args={"fail": True}, timeout_s=2)

    with pytest.raises(UnavailableError) as info:  # nobody subscribed: immediate, not a hang
        await maint_rpc.call(nc, "consolidate", workspace="w", project="p", actor="ann", args={}, timeout_s=5)
    assert info.value.code == "maintainer_unavailable"

    async def silent(msg):
        await asyncio.sleep(5)

    await nc.subscribe(maint_rpc.subject("forget_sweep"), cb=silent)
    with pytest.raises(BusTimeoutError):
        await maint_rpc.call(nc, "forget_sweep", workspace="w", project="p", actor="ann", args={}, timeout_s=0.3)
    with pytest.raises(ValueError):
        maint_rpc.subject("bogus")
