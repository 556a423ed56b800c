"""Posting batches to ``/hook/import``: what ``aimem import`` and the restore of an export share."""

from __future__ import annotations

import time
from typing import Any

import httpx
import typer

RETRIES = 8


def ingress_sender(url: str, token: str | None, *, timeout_s: float = 60.0):
    """Return a function posting one batch to ``<url>/hook/import`` (429/503 retried, honouring
    ``Retry-After``); it raises ``typer.Exit(1)`` after printing the server's message."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)

    def send(body: bytes) -> dict[str, Any]:
        for attempt in range(RETRIES):
            try:
                resp = http.post("/hook/import", content=body, headers={"Content-Type": "application/json"})
            except httpx.HTTPError as exc:
                import_failed(f"cannot reach ingress at {url}: {exc}")
            if resp.status_code in (429, 503) and attempt < RETRIES - 1:
                time.sleep(min(float(resp.headers.get("retry-after") or 1), 10.0))
                continue
            if resp.status_code >= 400:
                try:
                    message = resp.json()["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    message = resp.text[:200]
                import_failed(f"ingress answered {resp.status_code}: {message}")
            return resp.json()
        import_failed("ingress stayed saturated; run the import again later (nothing is imported twice)")
        return {}

    return send


def import_failed(message: str) -> None:
    """Print ``error: <message>`` on stderr and exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
