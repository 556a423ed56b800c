"""Small text and time helpers every package shares (stdlib only: the hook client imports it).

``cap_utf8`` cuts to a UTF-8 byte budget, ``replace_lone_surrogates`` makes decoded JSON
encodable, ``iso_from_epoch`` writes an epoch time as ISO-8601 UTC.
"""

from __future__ import annotations

import re
from typing import Any

ELLIPSIS = "…"  # 3 bytes in UTF-8: what marks a cut

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def cap_utf8(text: str, max_bytes: int, *, marker: str = ELLIPSIS) -> str:
    """Return ``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a code point.

    A cut result ends with ``marker`` (counted in the budget; left off when the budget is
    smaller than the marker). Lone surrogates (legal in JSON, not in UTF-8) become ``?``,
    so the result always encodes. Pure: what should not survive a cut (a secret's prefix)
    is the caller's to remove first (``aimem_common.sanitize.cap_redacted``).
    """
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text if text.isascii() else data.decode("utf-8")
    budget = max_bytes - len(marker.encode("utf-8"))
    if budget < 0:
        return data[:max(max_bytes, 0)].decode("utf-8", "ignore")
    # `ignore` only drops the partial code point the byte cut left at the end.
    return data[:budget].decode("utf-8", "ignore") + marker


def replace_lone_surrogates(value: Any, *, max_depth: int | None = None, depth: int = 0) -> Any:
    """Return ``value`` (decoded JSON) with every lone surrogate in strings and keys as U+FFFD.

    ``json.loads`` joins escaped surrogate *pairs* into one character; what remains is
    unpaired and cannot be encoded as UTF-8. Strings without one are returned as they are.
    With ``max_depth``, what is nested deeper becomes ``ELLIPSIS`` (for callers that have not
    bounded the depth already).
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if max_depth is not None and depth > max_depth:
        return ELLIPSIS
    if isinstance(value, dict):
        return {replace_lone_surrogates(str(k)): replace_lone_surrogates(v, max_depth=max_depth, depth=depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(v, max_depth=max_depth, depth=depth + 1) for v in value]
    return value


def iso_from_epoch(seconds: float) -> str | None:
    """Return epoch ``seconds`` as ISO-8601 UTC with milliseconds (``...Z``); None when out of range."""
    from datetime import UTC, datetime  # not at import: the hook client never needs it

    try:
        dt = datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["ELLIPSIS", "cap_utf8", "iso_from_epoch", "replace_lone_surrogates"]
