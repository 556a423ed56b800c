"""A request the HTTP parser rejects gets the JSON error body every other error has, not
uvicorn's plain text: real service processes, one worker and two, over a raw socket."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = [pytest.mark.integration]

BROKEN = {
    "content-length not a number": b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n{}",
    "bad request line": b"POST /hook HTTP/9\r\nHost: 127.0.0.1\r\n\r\n",
    "header without a colon": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n",
    "a URL past the parser's limit": b"GET /healthz?x=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


def _raw(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as is; return the status, headers and body of the answer."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def test_an_unparsable_request_gets_a_json_400(services) -> None:
    procs = services("writer")
    procs |= services("query")
    procs |= services("ingress", extra_env={"AIMEM_INGRESS__WORKERS": "2"})
    for name in ("writer", "query", "ingress"):
        for what, request in BROKEN.items():
            status, headers, body = _raw(procs[name].url, request)
            assert status == 400, (name, what, body)
            assert headers["content-type"] == "application/json", (name, what, headers)
            err = json.loads(body)["error"]
            assert err["code"] == "invalid_http" and "could not be parsed" in err["message"], (name, what, err)
            assert int(headers["content-length"]) == len(body)
        # The service goes on answering.
        assert httpx.get(f"{procs[name].url}/healthz", timeout=5).status_code == 200


def test_a_client_that_goes_away_mid_body_is_a_4xx_not_a_500(services) -> None:
    """A hook client killed while sending its body: the ingress counts a 400, logs no error."""
    import time

    procs = services("writer")
    procs |= services("ingress")
    u = urlsplit(procs["ingress"].url)
    for _ in range(3):
        with socket.create_connection((u.hostname, u.port), timeout=5) as sock:
            sock.sendall(b"POST /hook?agent=claude-code HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 200\r\n\r\n{\"session_id\":")
            time.sleep(0.2)
    deadline = time.monotonic() + 10
    while True:
        metrics = httpx.get(f"{procs['ingress'].url}/metrics", timeout=5).text
        counts = [line for line in metrics.splitlines()
                  if line.startswith("aimem_http_request_duration_seconds_count") and 'route="/hook"' in line]
        if any('status="400"' in c for c in counts) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert any('status="400"' in c for c in counts), counts
    assert not any('status="500"' in c for c in counts), counts
    assert "unhandled error" not in procs["ingress"].log_path.read_text()


def test_a_websocket_upgrade_is_answered_as_plain_http(services) -> None:
    """No service speaks WebSocket: an upgrade request is answered by the app as the plain
    request it also is (uvicorn's was an empty 403)."""
    procs = services("writer")
    status, headers, body = _raw(procs["writer"].url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                                 b"Connection: close, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    assert status == 200 and headers["content-type"] == "application/json", (status, headers, body)
    assert json.loads(body)["service"] == "writer"
