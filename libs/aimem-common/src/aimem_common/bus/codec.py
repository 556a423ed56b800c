"""What travels on the bus besides envelopes: the reply shape, trace headers, the bundle body.

A bundle (``aimem_common.bundles.Gatherer`` builds them; the writer splits them) is subject
``aimem.mut.bundle``, header ``Aimem-Bundle`` = the number of commands, body = the envelopes'
JSON one per line.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import propagate

from aimem_common.errors import AimemError, from_dict

BUNDLE_OP = "bundle"
BUNDLE_HEADER = "Aimem-Bundle"
# The writer announces on aimem.status.writer that it reads bundles (``{"bundles": 1}``):
# a writer from before bundles would take one for a bad envelope and drop its hooks, so
# the ingress gathers only while a fresh announcement says so.
BUNDLES_STATUS_KEY = "bundles"
BUNDLE_VERSION = 1


def encode_bundle(parts: list[bytes]) -> bytes:
    """Join envelopes' JSON (each ``Envelope.model_dump_json()``, no raw newline) into a body."""
    return b"\n".join(parts)


def split_bundle(data: bytes) -> list[bytes]:
    """Return the envelopes' JSON of a bundle body, in the order they were gathered."""
    return [part for part in data.split(b"\n") if part.strip()]


def trace_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``headers`` plus the current W3C trace context (``traceparent``)."""
    out = dict(headers or {})
    propagate.inject(out)
    return out


def extract_context(headers: dict[str, str] | None):
    """Return the OTel context carried in message headers (for a child span)."""
    return propagate.extract(headers or {})



def reply_body(cmd_id: str | None = None, *, result: dict[str, Any] | None = None,
               error: AimemError | None = None) -> dict[str, Any]:
    """The one reply shape of the bus: ``{cmd_id?, ok: true, result}`` or ``{cmd_id?, ok: false, error}``.

    The writer answers commands with it (``cmd_id`` set; the writer also stores it for
    idempotent re-sends) and the maintainer answers job requests (no ``cmd_id``). ``error``
    is ``AimemError.to_dict()`` plus its HTTP ``status``, so a custom code (e.g.
    ``invalid_name``) keeps its status on the far side.
    """
    head: dict[str, Any] = {} if cmd_id is None else {"cmd_id": cmd_id}
    if error is not None:
        return {**head, "ok": False, "error": {**error.to_dict(), "status": error.status}}
    return {**head, "ok": True, "result": result or {}}


def make_reply(cmd_id: str | None = None, *, result: dict[str, Any] | None = None,
               error: AimemError | None = None) -> bytes:
    """``reply_body`` as JSON bytes, ready to publish."""
    return json.dumps(reply_body(cmd_id, result=result, error=error), ensure_ascii=False).encode()


def parse_reply(raw: bytes, sender: str = "writer") -> dict[str, Any]:
    """Decode a reply (``reply_body``): return ``result`` or raise the typed error it carries."""
    msg = json.loads(raw)
    if msg.get("ok"):
        return msg.get("result") or {}
    raise from_dict(msg.get("error") or {"code": "internal", "message": f"{sender} error without detail"})
