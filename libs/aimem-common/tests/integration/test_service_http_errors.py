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
