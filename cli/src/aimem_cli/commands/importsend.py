"""Posting batches to ``/hook/import``: what ``aimem import`` and the restore of an export share."""

from __future__ import annotations

import time
from typing import Any, Callable

import httpx
import typer

SATURATED_PATIENCE_S = 600.0  # 429/503 for this long in a row (no batch accepted): give up, exit 1
MAX_RETRY_AFTER_S = 10.0


def ingress_sender(url: str, token: str | None, *, timeout_s: float = 60.0,
                   patience_s: float = SATURATED_PATIENCE_S, sleep: Callable[[float], None] = time.sleep):
    """Return a function posting one batch to ``<url>/hook/import``; it raises ``typer.Exit(1)``
    after printing the server's message.

    A 429 or 503 (the import lane's back-pressure: the writer serves live work first) is retried
    after its ``Retry-After`` (≤ ``MAX_RETRY_AFTER_S`` s) for up to ``patience_s`` seconds; the
    batch's idempotency keys make every retry safe.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)

    def send(body: bytes) -> dict[str, Any]:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                resp = http.post("/hook/import", content=body, headers={"Content-Type": "application/json"})
            except httpx.HTTPError as exc:
                import_failed(f"cannot reach ingress at {url}: {exc}")
            if resp.status_code in (429, 503) and time.monotonic() < deadline:
                try:
                    wait = float(resp.headers.get("retry-after") or 1)
                except ValueError:
                    wait = 1.0
                sleep(min(max(wait, 0.1), MAX_RETRY_AFTER_S))
                continue
            if resp.status_code >= 400:
                try:
                    message = resp.json()["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    message = resp.text[:200]
                import_failed(f"ingress answered {resp.status_code}: {message}")
            if resp.status_code in (429, 503):
                import_failed(f"ingress stayed saturated for {patience_s:.0f} s; run the import again later"
                      " (nothing is imported twice)")
            return resp.json()

    return send


def import_failed(message: str) -> None:
    """Print ``error: <message>`` on stderr and exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
