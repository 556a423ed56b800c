"""The request gate on every service of a real stack with a root token: credentials before
the body, a time bound on reading it, ``metrics.require_token``, and what a scoped API key
sees in ``/api/v1/status``.

Raw sockets: a client that sends its headers and part of a body, then stalls, must be
answered (408, or the route's own early answer) and disconnected within
``server.body_read_timeout_s``; one without a credential gets 401 before sending any body.
"""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TOKEN = "gate-test-root-token"
BODY_TIMEOUT_S = 1.5
SLACK_S = 2.5  # a loaded 2-core CI machine: scheduling, not the bound itself
# One path per service; the first three read their body, writer and maintainer have none.
PATHS = {"ingress": "/hook?agent=claude-code", "query": "/api/v1/search", "mcp-gateway": "/mcp",
         "writer": "/anything", "maintainer": "/anything"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    env = {"AIMEM_AUTH__TOKEN": TOKEN, "AIMEM_SERVER__BODY_READ_TIMEOUT_S": str(BODY_TIMEOUT_S),
           "AIMEM_METRICS__REQUIRE_TOKEN": "true"}
    with LocalStack(root / "data", root / "logs", extra_env=env) as s:
        yield s


def _partial_request(url: str, path: str, *, token: str | None, body_part: bytes) -> tuple[bytes, float, bool]:
    """Send headers announcing 1,000 body bytes plus ``body_part``, then stall.

    Returns what the server sent, the seconds until its first byte, and whether it closed
    the connection (EOF within the bound and slack).
    """
    u = urlsplit(url)
    headers = [f"POST {path} HTTP/1.1", f"Host: {u.hostname}:{u.port}", "Content-Type: application/json",
               "Accept: application/json, text/event-stream", "Content-Length: 1000"]
    if token:
        headers.append(f"Authorization: Bearer {token}")
    with socket.create_connection((u.hostname, u.port), timeout=BODY_TIMEOUT_S + SLACK_S + 5) as sock:
        t0 = time.monotonic()
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode() + body_part)
        got = b""
        first = None
        closed = False
        sock.settimeout(0.2)
        while time.monotonic() - t0 < BODY_TIMEOUT_S + SLACK_S:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if first is None:
                first = time.monotonic() - t0
            if not chunk:
                closed = True
                break
            got += chunk
        return got, (first if first is not None else float("inf")), closed


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def test_a_stalled_body_is_answered_and_closed_within_the_bound_on_every_service(stack):
    def probe(service: str) -> tuple[str, bytes, float, bool]:
        return (service, *_partial_request(stack.url(service), PATHS[service], token=TOKEN, body_part=b'{"prom'))

    with ThreadPoolExecutor(len(PATHS)) as pool:
        results = list(pool.map(probe, PATHS))
    for service, raw, first_s, closed in results:
        status = _status(raw)
        assert closed, f"{service} still held the connection after {BODY_TIMEOUT_S + SLACK_S} s: {raw[:200]!r}"
        assert first_s <= BODY_TIMEOUT_S + SLACK_S, (service, first_s)
        if service in ("ingress", "query", "mcp-gateway"):  # these read the body: the gate answers
            assert status == 408, (service, raw[:300])
            assert first_s >= BODY_TIMEOUT_S - 0.2, (service, first_s)
            body = json.loads(raw.split(b"\r\n\r\n", 1)[1])
            assert body["error"]["code"] == "body_timeout"
            assert b"connection: close" in raw.lower()
        else:  # nothing reads it: the route's own answer at once, then the connection closes
            assert status == 404, (service, raw[:300])


def test_without_a_credential_the_answer_is_401_before_any_body_byte(stack):
    for service, path in PATHS.items():
        raw, first_s, closed = _partial_request(stack.url(service), path, token=None, body_part=b"")
        assert _status(raw) == 401, (service, raw[:300])
        assert first_s < BODY_TIMEOUT_S, (service, first_s)  # not the body timeout's answer
        assert closed, service
        raw, first_s, _ = _partial_request(stack.url(service), path, token="wrong-token", body_part=b"")
        assert _status(raw) == 401 and first_s < BODY_TIMEOUT_S, (service, raw[:300])


def test_metrics_and_api_docs_need_the_root_token_when_configured(stack):
    for service in PATHS:
        base = stack.url(service)
        for path in ("/metrics", "/openapi.json", "/docs"):
            assert httpx.get(base + path).status_code == 401, (service, path)
            ok = httpx.get(base + path, headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, (service, path)
        assert httpx.get(base + "/healthz").status_code == 200  # probes stay open


def _hook(stack, project: str, session: str, prompt: str) -> None:
    r = httpx.post(stack.url("ingress") + "/hook", params={"agent": "claude-code", "project": project},
                   json={"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": prompt,
                         "cwd": f"/work/{project}"},
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 202, r.text


def test_a_scoped_key_sees_only_its_projects_figures_in_status(stack):
    root = {"Authorization": f"Bearer {TOKEN}"}
    q = stack.url("query")
    for i in range(3):
        _hook(stack, "alpha", "s-alpha", f"alpha prompt {i}")
    for i in range(5):
        _hook(stack, "beta", f"s-beta-{i}", f"beta prompt {i}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        counts = httpx.get(q + "/api/v1/status", headers=root).json()["counts"]
        if counts["observations"] >= 8:
            break
        time.sleep(0.2)
    assert counts["observations"] == 8 and counts["projects"] == 2 and counts["sessions"] == 6
    r = httpx.post(q + "/admin/users", json={"name": "carol"}, headers=root)
    assert r.status_code in (200, 201), r.text
    r = httpx.put(q + "/admin/grants", json={"user": "carol", "workspace": "default", "project": "alpha",
                                             "can_read": True, "can_write": False}, headers=root)
    assert r.status_code == 200, r.text
    r = httpx.post(q + "/admin/api-keys", json={"user": "carol"}, headers=root)
    assert r.status_code in (200, 201), r.text
    key = r.json()["key"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # users, grants and keys go through the writer
        scoped = httpx.get(q + "/api/v1/status", headers={"Authorization": f"Bearer {key}"})
        if scoped.status_code == 200 and (scoped.json()["counts"] or {}).get("projects") == 1:
            break
        time.sleep(0.2)
    body = scoped.json()
    assert scoped.status_code == 200, scoped.text
    assert body["counts"]["projects"] == 1 and body["counts"]["observations"] == 3
    assert body["counts"]["sessions"] == 1
    assert body["db_bytes"] is None and body["data_dir"] is None
    everything = httpx.get(q + "/api/v1/status", headers=root).json()
    assert everything["counts"]["observations"] == 8 and everything["db_bytes"] > 0
    # the scoped key may not scrape /metrics either (store-wide figures)
    assert httpx.get(q + "/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 403
