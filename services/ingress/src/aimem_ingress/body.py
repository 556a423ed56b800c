"""Read and decode a hook request body within its limits (pure helpers + one async reader).

Order of checks, each a typed 4xx in the JSON error envelope:

* ``Content-Length`` over the cap → 413 before a byte is read; the stream itself is counted
  too (chunked uploads), so the cap holds while reading, not after buffering.
* invalid UTF-8 → 400 ``invalid_utf8``; not JSON → 400 ``invalid_json``;
* nesting deeper than ``max_depth`` → 400 ``too_deep`` (checked on the parsed value, and a
  ``RecursionError`` from the parser itself lands on the same code);
* a lone surrogate escape (``"\\ud800"``: valid JSON, not encodable text) becomes U+FFFD in
  keys and values, so the event is kept instead of failing later — except in an identity
  field (``session_id``, ``cwd``), which ``normalize.check_identity`` then refuses (400
  ``invalid_field``): two ids that differ only there would otherwise merge.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from starlette.requests import Request

from aimem_common.errors import BadRequestError, PayloadTooLargeError
from aimem_common.text import replace_lone_surrogates

_LONG_DIGITS = re.compile(rb"\d{20}")  # 2**64 has 20 digits


async def read_capped(request: Request, max_bytes: int) -> bytes:
    """Return the request body, refusing more than ``max_bytes`` bytes.

    Raises:
        PayloadTooLargeError: declared or actual size over ``max_bytes`` (413).
        BadRequestError: a malformed ``Content-Length`` header.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequestError("Content-Length is not an integer", code="invalid_header") from None
        if size > max_bytes:
            raise _too_large(max_bytes)
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"request body over {max_bytes} bytes", code="payload_too_large", data={"max_bytes": max_bytes}
    )


def decode_json(raw: bytes, *, max_depth: int) -> Any:
    """Decode ``raw`` as strict UTF-8 JSON no deeper than ``max_depth`` containers.

    Raises:
        BadRequestError: ``empty_body``, ``invalid_utf8``, ``invalid_json`` or ``too_deep``.
    """
    if not raw.strip():
        raise BadRequestError("empty request body; expected a JSON object", code="empty_body")
    if _LONG_DIGITS.search(raw):  # maybe an integer beyond 64 bits: orjson would make it a float
        value = _decode_slow(raw, max_depth)
    else:
        try:  # fast path: orjson (strict UTF-8 and JSON); what it refuses gets the exact verdict below
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = _decode_slow(raw, max_depth)
    if json_depth(value) > max_depth:
        raise _too_deep(max_depth)
    return value


def _decode_slow(raw: bytes, max_depth: int) -> Any:
    """The standard library's decoder: precise error messages, and what orjson refuses or
    changes but JSON allows (integers beyond 64 bits, lone surrogate escapes, NaN). Lone
    surrogates only ever arrive here (orjson refuses them), so the U+FFFD replacement is
    done on this path."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"body is not valid UTF-8 (byte {exc.start})", code="invalid_utf8") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except json.JSONDecodeError as exc:
        raise BadRequestError(f"body is not JSON: {exc.msg} at line {exc.lineno}", code="invalid_json") from None
    except ValueError as exc:  # e.g. an integer literal over Python's 4,300-digit limit
        raise BadRequestError(f"body is not JSON: {exc}", code="invalid_json") from None
    if json_depth(value) > max_depth:
        raise _too_deep(max_depth)
    return replace_lone_surrogates(value)  # depth already bounded above


def _too_deep(max_depth: int) -> BadRequestError:
    return BadRequestError(f"JSON nested deeper than {max_depth} levels", code="too_deep",
                           data={"max_depth": max_depth})


def json_depth(value: Any) -> int:
    """Return the container nesting depth of a decoded JSON value (scalars are 0); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest
