"""Hostile clients against a real stack with a root token (one stack for the module).

The request gate on every service: credentials before the body, a time bound on reading
it, ``metrics.require_token``, and what a scoped API key sees in ``/api/v1/status``.

Raw sockets: a client that sends its headers and part of a body, then stalls, must be
answered within ``server.body_read_timeout_s`` (408 and disconnected where the route reads
the body, the route's own answer at once where none does); one without a credential gets
401 before sending any body.

Fuzzing: schemathesis against every service's ``/openapi.json`` with bounded examples, and
a hook fuzzer against ``/hook`` and ``/hook/session-start-context`` (lone surrogates, huge
integers, deep nesting, odd types, bad or huge ``Content-Length``, wrong ``Content-Type``,
truncated bodies). Every answer must be below 500, what was stored before is still there
afterwards, and every event answered 202 is stored exactly once (none dead-lettered). The
corpus is seeded (``AIMEM_FUZZ_SEED``, printed on failure) so a finding can be replayed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TOKEN = "gate-test-root-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SEED = int(os.environ.get("AIMEM_FUZZ_SEED", "1515"))
HOOK_CASES = int(os.environ.get("AIMEM_FUZZ_HOOK_CASES", "250"))
SERVICES = ("ingress", "query", "mcp-gateway", "writer", "maintainer")
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


def _partial_request(url: str, path: str, *, token: str | None, body_part: bytes,
                     wait_close: bool = False) -> tuple[bytes, float, bool]:
    """Send headers announcing 1,000 body bytes plus ``body_part``, then stall.

    Returns what the server sent, the seconds until its first byte, and whether it closed
    the connection (EOF within the bound and slack; waited for only with ``wait_close``).
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
            if not wait_close and b"\r\n\r\n" in got:
                break
        return got, (first if first is not None else float("inf")), closed


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def test_a_stalled_body_is_answered_and_closed_within_the_bound_on_every_service(stack):
    def probe(service: str) -> tuple[str, bytes, float, bool]:
        return (service, *_partial_request(stack.url(service), PATHS[service], token=TOKEN, body_part=b'{"prom',
                                           wait_close=service in ("ingress", "query", "mcp-gateway")))

    with ThreadPoolExecutor(len(PATHS)) as pool:
        results = list(pool.map(probe, PATHS))
    for service, raw, first_s, closed in results:
        status = _status(raw)
        assert first_s <= BODY_TIMEOUT_S + SLACK_S, (service, first_s)
        if service in ("ingress", "query", "mcp-gateway"):  # these read the body: the gate answers
            assert closed, f"{service} still held the connection after {BODY_TIMEOUT_S + SLACK_S} s: {raw[:200]!r}"
            assert status == 408, (service, raw[:300])
            assert first_s >= BODY_TIMEOUT_S - 0.2, (service, first_s)
            body = json.loads(raw.split(b"\r\n\r\n", 1)[1])
            assert body["error"]["code"] == "body_timeout"
            assert b"connection: close" in raw.lower()
        else:  # nothing reads it: the route's own answer, at once
            assert status == 404 and first_s < BODY_TIMEOUT_S, (service, raw[:300])


def test_without_a_credential_the_answer_is_401_before_any_body_byte(stack):
    for service, path in PATHS.items():
        raw, first_s, _ = _partial_request(stack.url(service), path, token=None, body_part=b"")
        assert _status(raw) == 401, (service, raw[:300])
        assert first_s < BODY_TIMEOUT_S, (service, first_s)  # not the body timeout's answer
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
                         "cwd": f"/home/dev/{project}"},
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


# -- the hook fuzzer -----------------------------------------------------------------------
BASE_EVENTS = [
    {"hook_event_name": "UserPromptSubmit", "session_id": "fz", "prompt": "hello", "cwd": "/home/dev/fuzz"},
    {"hook_event_name": "PostToolUse", "session_id": "fz", "tool_name": "Bash", "cwd": "/home/dev/fuzz",
     "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a\nb"}},
    {"hook_event_name": "SessionStart", "session_id": "fz", "source": "startup", "cwd": "/home/dev/fuzz"},
    {"hook_event_name": "SessionEnd", "session_id": "fz", "reason": "exit", "cwd": "/home/dev/fuzz"},
    {"hook_event_name": "Stop", "session_id": "fz", "cwd": "/home/dev/fuzz"},
]
NASTY_VALUES = [
    "\ud800", "x\udfffy", "\udc00\ud800", "\u0000", "\ufeff", "\u202e", "a" * 70_000, "../../etc/passwd",
    10**30, -(10**25), 2**63, 2**64 + 1, 1e308, -0.0, True, None, [], {}, [[[[["deep"]]]]], {"k": {"k": {}}},
    "C:\\Users\\x", "/", "", " ", "😀" * 100, "\n" * 1000, "%00", "${jndi:ldap://x}",
]
NASTY_PARAMS = {
    "agent": ["claude-code", "codex", "gemini", "cursor", "copilot", "opencode", "unknown-agent", "", "x" * 500],
    "event": ["", "UserPromptSubmit", "bogus", "\u00e9v\u00e9nement", "x" * 300],
    "project": ["fuzz", None, "a/b", "..", ".hidden", "x" * 300, "\u00fcber", "sp ace"],
    "workspace": [None, "default", "../w", "x" * 300],
    "cwd": ["/home/dev/fuzz", None, "", "x" * 5000, "C:\\work\\fuzz"],
    "ts": ["1700000000.5", None, "0", "-1", "1e309", "nan", "99999999999999999999", "abc", "1700000000.5"],
    "root": [None, "/home/dev/fuzz", "\u0007bell", "y" * 5000],
    "origin": [None, "github.com/o/r", "z" * 2000],
    "named": [None, "1", "0"],
    "extension": [None, "x", "y" * 300],
}


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _mutate(rng: random.Random) -> tuple[dict[str, str], bytes, dict[str, str]]:
    """One case: query params, body bytes, extra headers."""
    event = json.loads(json.dumps(rng.choice(BASE_EVENTS)))
    for _ in range(rng.randint(0, 4)):
        key = rng.choice([*event.keys(), "tool_input", "transcript_path", "model", "project", "extra", "\ud800k",
                          "idempotency_key"])
        event[key] = rng.choice(NASTY_VALUES)
    event["session_id"] = event.get("session_id") if rng.random() < 0.3 else f"fz-{rng.randrange(10**9)}"
    # each parameter: its first (usable) value mostly, so the body's oddities reach the parser
    params = {k: v for k, choices in NASTY_PARAMS.items()
              if (v := rng.choice(choices) if rng.random() < 0.12 else choices[0]) is not None}
    body = json.dumps(event, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    kind = rng.random()
    if kind < 0.08:
        body = _deep(rng.choice([63, 64, 65, 200, 5000])).encode()
    elif kind < 0.14:
        body = b'{"hook_event_name": "UserPromptSubmit", "prompt": ' + rng.choice([b"1" + b"0" * 40, b"-" + b"9" * 4400, b"1e999"]) + b"}"
    elif kind < 0.18:
        body = rng.choice([b"", b"   ", b"null", b"[]", b"1", b'"x"', b"NaN", b'{"a": Infinity}', b"\xff\xfe{}",
                           b"\xef\xbb\xbf{}", b'{"a":"\\ud800"', b"{" * 3])
    elif kind < 0.22:
        body = body[: rng.randrange(max(1, len(body)))]  # a truncated document, sent whole
    headers = {}
    if rng.random() < 0.05:
        headers["Content-Type"] = rng.choice(["text/plain", "application/x-www-form-urlencoded",
                                              "application/json; charset=utf-16", "application/vnd.x+json"])
    if rng.random() < 0.1:
        headers["Idempotency-Key"] = rng.choice(["k", "x" * 300, "tab\tkey", f"fz-{rng.randrange(50)}"])
    return params, body, headers


def _raw(url: str, request: bytes, *, close_after_send: bool = False) -> int:
    """Send raw bytes, return the status of the answer (0 when the server just closed)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=15) as sock:
        sock.sendall(request)
        if close_after_send:
            sock.shutdown(socket.SHUT_WR)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def _raw_cases(host: str, path: str) -> list[tuple[str, bytes, bool]]:
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
    body = b'{"hook_event_name": "UserPromptSubmit", "session_id": "raw", "prompt": "p", "cwd": "/home/dev/raw"}'
    ct = "Content-Type: application/json\r\n"
    return [
        ("non-integer length", (head + ct + "Content-Length: abc\r\n\r\n").encode() + body, False),
        ("negative length", (head + ct + "Content-Length: -5\r\n\r\n").encode() + body, False),
        ("huge length", (head + ct + "Content-Length: 99999999999999999999999\r\n\r\n").encode() + body, True),
        ("over the cap", (head + ct + "Content-Length: 50000000\r\n\r\n").encode() + body, True),
        ("shorter than sent", (head + ct + "Content-Length: 10\r\n\r\n").encode() + body, False),
        ("longer than sent", (head + ct + f"Content-Length: {len(body) + 50}\r\n\r\n").encode() + body, True),
        ("two lengths", (head + ct + "Content-Length: 5\r\nContent-Length: 7\r\n\r\n").encode() + body, False),
        ("length and chunked", (head + ct + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
         + b"5\r\nhello\r\n0\r\n\r\n", False),
        ("bad chunk size", (head + ct + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"zz\r\nhello\r\n0\r\n\r\n", False),
        ("chunked, truncated", (head + ct + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"ff\r\n{\"a\"", True),
        ("no content type", (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body, False),
        ("text/plain", (head + "Content-Type: text/plain\r\n" + f"Content-Length: {len(body)}\r\n\r\n").encode() + body,
         False),
    ]


def _observations(stack) -> int:
    return httpx.get(stack.url("query") + "/api/v1/status", headers=AUTH).json()["counts"]["observations"]


def _settled_observations(stack) -> int:
    """The observation count once two reads a second apart agree (the writer caught up)."""
    last = _observations(stack)
    for _ in range(30):
        time.sleep(1)
        now = _observations(stack)
        if now == last:
            return now
        last = now
    return last


def _wait_observations(stack, expected: int, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    got = _observations(stack)
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.3)
        got = _observations(stack)
    return got


def test_hook_fuzzer_gets_no_server_error_and_loses_nothing(stack):
    ingress = stack.url("ingress")
    before = _settled_observations(stack)  # what earlier tests stored
    kept = 0
    for i in range(10):  # stored before the fuzzing: must all still be there afterwards
        r = httpx.post(ingress + "/hook", params={"agent": "claude-code", "project": "keep"}, headers=AUTH,
                       json={"hook_event_name": "UserPromptSubmit", "session_id": "keep", "prompt": f"keep me {i}",
                             "cwd": "/home/dev/keep"})
        assert r.status_code == 202, r.text
        kept += 1
    assert _wait_observations(stack, before + kept) == before + kept
    rng = random.Random(SEED)
    server_errors: list[str] = []
    accepted = 0
    statuses: Counter[int] = Counter()
    with httpx.Client(timeout=30) as client:
        for n in range(HOOK_CASES):
            path = "/hook" if n % 4 else "/hook/session-start-context"
            params, body, headers = _mutate(rng)
            r = client.post(ingress + path, params=params, content=body,
                            headers={**AUTH, "Content-Type": "application/json", **headers})
            statuses[r.status_code] += 1
            if r.status_code >= 500:
                server_errors.append(f"case {n} {path} {params} {body[:300]!r} {headers} -> {r.status_code} {r.text[:300]}")
            elif r.status_code == 202 and not r.json().get("duplicate"):
                accepted += 1
    u = urlsplit(ingress)
    for path in ("/hook?agent=claude-code", "/hook/session-start-context?agent=claude-code"):
        for name, request, close in _raw_cases(f"{u.hostname}:{u.port}", path):
            status = _raw(ingress, request, close_after_send=close)
            if status >= 500:
                server_errors.append(f"raw {name} on {path} -> {status}")
            elif status == 202:
                accepted += 1
    assert not server_errors, f"seed {SEED}:\n" + "\n".join(server_errors)
    print(f"hook fuzzer, seed {SEED}: {dict(sorted(statuses.items()))}")
    # the corpus reaches the parser and the bus, not only the front door's refusals
    assert statuses[202] + statuses[200] >= HOOK_CASES // 5, statuses
    assert httpx.get(ingress + "/healthz").status_code == 200
    # every 202 stored exactly once, and nothing stored before was lost
    expected = before + kept + accepted
    assert _wait_observations(stack, expected) == expected, f"seed {SEED}"
    keep = httpx.get(stack.url("query") + "/api/v1/workspaces/default/projects/keep/status", headers=AUTH).json()
    assert keep["counts"]["observations"] == kept
    admin = httpx.get(stack.url("query") + "/admin/status", headers=AUTH).json()
    assert admin["dead_letters_open"] == 0, admin


def _schemathesis() -> list[str]:
    exe = Path(sys.executable).with_name("schemathesis")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed: pip install -r requirements-dev.txt", pytrace=False)
    return [found]


def test_schemathesis_finds_no_server_error_on_any_service(stack, tmp_path):
    failures = []
    for service in SERVICES:
        schema = httpx.get(stack.url(service) + "/openapi.json", headers=AUTH).json()
        if not schema["paths"]:  # writer, maintainer, mcp-gateway (JSON-RPC is not described there)
            continue
        cmd = [*_schemathesis(), "run", stack.url(service) + "/openapi.json", "-H", f"Authorization: Bearer {TOKEN}",
               "--checks", "not_a_server_error", "--phases", "examples,coverage,fuzzing", "--max-examples", "6",
               "--seed", str(SEED), "--workers", "1", "--request-timeout", "15", "--no-color"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)  # its cache dir
        (tmp_path / f"{service}.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            failures.append(f"{service} (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[:6000]}")
    assert not failures, "\n\n".join(failures)
