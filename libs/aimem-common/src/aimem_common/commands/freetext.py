"""Free text in command payloads, redacted by its type (the writer's sanitizing boundary).

A payload field typed ``FreeText`` (page title and body, handoff and message bodies,
feedback reasons) or ``FreeData`` (frontmatter, evidence: every string inside, keys and
values) goes through ``aimem_common.redact`` whenever the payload model is validated: in
the caller before it publishes (so the bus never holds the secret) and again in the writer
when it parses the command (``parse_payload``), so no write path stores a raw secret.
Redaction is idempotent, so validating twice changes nothing more.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

from aimem_common.redact import redact


def redact_text(value: str) -> str:
    """Return ``value`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    return redact(value).text


def redact_data(value: Any) -> Any:
    """Return ``value`` (JSON-like) with every string in it — dict keys too — redacted (iterative)."""
    if isinstance(value, str):
        return redact_text(value)
    if not isinstance(value, (dict, list)):
        return value
    out: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, out)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for k, v in items:
            if isinstance(v, (dict, list)):
                child: Any = {} if isinstance(v, dict) else []
                stack.append((v, child))
            else:
                child = redact_text(v) if isinstance(v, str) else v
            if isinstance(dst, dict):
                dst[redact_text(k) if isinstance(k, str) else k] = child
            else:
                dst.append(child)
    return out


FreeText = Annotated[str, AfterValidator(redact_text)]
#: Metadata for a JSON-like field: ``Annotated[dict[str, Any], FreeData]``.
FreeData = AfterValidator(redact_data)
