"""Every integer id parameter is bounded by one validator (``aimem_common.models.DbId``):
an id outside 1..2^63−1 is a 400 ``bad_request``, never a 500."""

from __future__ import annotations

import httpx
import pytest

pytestmark = [pytest.mark.integration]

HUGE = str(2**64)


def test_out_of_range_ids_are_400(services) -> None:
    svc = services("writer", "query")
    base = svc["query"].url
    export = "/api/v1/workspaces/default/projects/p/export"
    calls = [
        ("GET", f"/admin/pending-writes/{HUGE}", None),
        ("GET", "/admin/pending-writes/0", None),
        ("POST", "/admin/pending-writes/approve", {"ids": [2**64]}),
        ("POST", "/admin/pending-writes/reject", {"ids": [-1]}),
        ("DELETE", f"/admin/api-keys/{HUGE}", None),
        ("GET", f"/api/v1/workspaces/default/projects/p/pages/{HUGE}", None),
        ("POST", "/admin/dead-letters/replay", {"ids": [2**63]}),
        ("POST", "/admin/pages", {"project": "p", "path": "a.md", "body": "x", "expected_page_id": 2**70}),
        # Cursors and offsets reach SQLite too: the same 64-bit bound.
        ("GET", f"{export}?part=sessions&after=9223372036854775808", None),
        ("GET", f"{export}?part=observations&after=9223372036854775808", None),
        ("GET", f"{export}?part=pages&after=99999999999999999999999", None),
        ("GET", f"{export}?part=handoffs&after=-1", None),
        ("GET", f"/api/v1/workspaces/default/projects/p/sessions/s1/observations?offset={HUGE}", None),
    ]
    with httpx.Client(base_url=base, timeout=10) as client:
        # The project exists, so a cursor past the bound would reach SQLite (a 500 before).
        r = client.post("/admin/pages", json={"project": "p", "path": "a.md", "body": "x"})
        assert r.status_code in (200, 201), r.text
        for method, path, body in calls:
            r = client.request(method, path, json=body)
            assert r.status_code == 400, (method, path, r.status_code, r.text)
            assert r.json()["error"]["code"] == "bad_request"
