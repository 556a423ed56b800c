"""A line of a bundle the writer cannot read is a visible dead letter, and a replay of it
is refused by name (it is no envelope), never a 5xx: real writer and query processes."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from aimem_common import bus as busmod
from aimem_common.bus import BUNDLE_HEADER, encode_bundle
from aimem_common.commands import make_envelope
from aimem_common.models import ObservationKind
from aimem_common.sanitize import RawObservation, sanitize

pytestmark = [pytest.mark.integration, pytest.mark.asyncio, pytest.mark.timeout(90)]


def _obs(i: int) -> bytes:
    raw = RawObservation(session_id="s1", kind=ObservationKind.USER_PROMPT, agent="claude-code",
                         cwd="/w/app", title=f"Prompt {i}", body=f"prompt number {i}")
    return make_envelope("observation.append", sanitize(raw).to_payload(), project="app").model_dump_json().encode()


async def test_an_unreadable_line_of_a_bundle_is_a_dead_letter_and_replay_names_it(services, bus) -> None:
    svc = services("writer", "query")
    body = encode_bundle([_obs(1), b'{"op": "observation.append", "not an envelope": [', _obs(2)])
    await bus.js.publish(busmod.mut_subject("bundle"), body, headers={BUNDLE_HEADER: "3", busmod.MSG_ID_HEADER: "b1"})
    with httpx.Client(base_url=svc["query"].url, timeout=10) as client:
        deadline = time.monotonic() + 30
        dead: list = []
        while time.monotonic() < deadline and not dead:
            dead = client.get("/admin/dead-letters").json()["dead_letters"]
            if not dead:
                await asyncio.sleep(0.2)
        assert len(dead) == 1 and dead[0]["op"] == "unknown", dead
        assert dead[0]["error_code"] == "invalid_envelope" and "invalid command envelope" in dead[0]["reason"], dead
        sessions = client.get("/api/v1/workspaces/default/projects/app/sessions/s1/observations").json()
        titles = sorted(o["title"] for o in sessions["observations"])
        assert titles == ["Prompt 1", "Prompt 2"]  # its neighbours are stored
        r = client.post("/admin/dead-letters/replay", json={"all": True})
        assert r.status_code == 200, r.text
        assert r.json() == {"replayed": [], "unreadable": [dead[0]["id"]]}
        assert client.get("/admin/dead-letters").json()["open"] == 1  # left open for a person
