"""A small HTTP client for the query service (``/api/v1`` and ``/admin``).

Every failure becomes ``CliError`` with a one-line message (the server's error envelope
message when there is one), which the commands print and turn into exit code 1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx


class CliError(Exception):
    """A command failed; ``str(e)`` is the one-line message. ``status``/``code`` when HTTP."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None,
                 data: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.data = data or {}


class Client:
    """Talks to ``server`` (e.g. ``http://127.0.0.1:8702``) with an optional bearer token.

    Args:
        server: base URL of the query service.
        token: root token or ``aim_`` API key (None = no Authorization header).
        timeout_s: per-request timeout in seconds.
    """

    def __init__(self, server: str, token: str | None = None, *, timeout_s: float = 60.0):
        self.server = server.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, params: dict | None = None, json: Any = None) -> Any:
        """Send one request; return the decoded JSON body.

        Raises:
            CliError: connection failure, timeout, or a non-2xx answer.
        """
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            resp = self._http.request(method, path, params=params, json=json)
        except httpx.TimeoutException as exc:
            raise CliError(f"{self.server} did not answer in time ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.server}: {exc}") from exc
        return self._decode(resp)

    def get(self, route: str, /, **params: Any) -> Any:
        return self.request("GET", route, params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("POST", path, json=body)

    def download(self, path: str, dest: Path) -> int:
        """Stream a binary response to ``dest`` (atomically: tmp + rename); return bytes.

        The file is created owner-only (0600) whatever the umask: the one download is
        ``/admin/backup``, whose archive holds the whole store (memory, key and session
        hashes, profiles).

        Raises:
            CliError: as ``request``; ``dest`` is left untouched on failure.
        """
        tmp = dest.with_name(f".{dest.name}.part")
        n = 0
        try:
            with self._http.stream("GET", path) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._decode(resp)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.fchmod(fd, 0o600)  # a stale .part left by an older run keeps its own mode
                with os.fdopen(fd, "wb") as f:
                    for chunk in resp.iter_bytes(1 << 20):
                        f.write(chunk)
                        n += len(chunk)
            tmp.replace(dest)
        except httpx.HTTPError as exc:
            tmp.unlink(missing_ok=True)
            raise CliError(f"cannot reach {self.server}: {exc}") from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return n

    @staticmethod
    def _decode(resp: httpx.Response) -> Any:
        if resp.status_code < 400:
            if not resp.content:
                return None
            try:
                return resp.json()
            except ValueError as exc:
                raise CliError(f"server answered {resp.status_code} with a non-JSON body") from exc
        try:
            err = resp.json().get("error") or {}
        except (ValueError, AttributeError):
            err = {}
        message = err.get("message") or resp.reason_phrase or "request failed"
        raise CliError(f"{message} (HTTP {resp.status_code})", status=resp.status_code, code=err.get("code"),
                       data=err.get("data"))
