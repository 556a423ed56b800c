"""A minimal HTTP/1.1 POST over a raw socket for the hook client (stdlib, no http.client).

``http.client`` pulls in ``email.*`` at import (several ms); a hook runs on every agent
event, so plain ``http://`` goes over a socket with one absolute deadline covering connect,
send and the whole response. ``https://`` falls back to ``http.client`` (imported lazily).
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlencode, urlsplit

MAX_RESPONSE_BYTES = 1024 * 1024


def post(base_url: str, path: str, *, query: dict[str, str], body: bytes, headers: dict[str, str],
         timeout_s: float) -> tuple[int, bytes] | None:
    """POST ``body`` to ``base_url + path?query``; return ``(status, body)`` or None.

    None means no answer within ``timeout_s`` seconds (refused, unreachable, hung, cut).
    The deadline is absolute: a server that accepts and never answers costs ``timeout_s``.
    """
    if timeout_s <= 0:
        return None
    url = urlsplit(base_url)
    target = (url.path.rstrip("/") + path) + ("?" + urlencode(query) if query else "")
    if url.scheme == "https":
        return _post_tls(url.hostname or "localhost", url.port or 443, target, body, headers, timeout_s)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    deadline = time.monotonic() + timeout_s
    head = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace") + body
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(request)
            return _read_response(sock, deadline)
    except (OSError, ValueError):
        return None


def _read_response(sock: socket.socket, deadline: float) -> tuple[int, bytes] | None:
    buf = b""
    length: int | None = None
    header_end = -1
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if chunk:
            buf += chunk
            if len(buf) > MAX_RESPONSE_BYTES:
                return None
        if header_end < 0:
            header_end = buf.find(b"\r\n\r\n")
            if header_end >= 0:
                for line in buf[:header_end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
        if header_end >= 0 and (not chunk or (length is not None and len(buf) - header_end - 4 >= length)):
            break
        if not chunk:
            return None
    parts = buf[:header_end].split(b" ", 2)
    status = int(parts[1])
    content = buf[header_end + 4:]
    return status, content[:length] if length is not None else content


def _post_tls(host: str, port: int, target: str, body: bytes, headers: dict[str, str],
              timeout_s: float) -> tuple[int, bytes] | None:
    import http.client

    try:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout_s)
        conn.request("POST", target, body=body, headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read(MAX_RESPONSE_BYTES)
    except (OSError, http.client.HTTPException):
        return None
