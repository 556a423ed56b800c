"""``[admission]``: project-defined policy asked before a destructive operation.

Every caller that can send a destructive op to the writer (the query service's ``/admin``
routes and web UI through ``aimem_query.deps.send``, the MCP gateway through
``ToolCall.command``) calls ``admit()`` first, so no HTTP call ever happens inside the
writer or its transaction. Governed ops and their operation names:

=================  ==================
writer op          operation
=================  ==================
``page.delete``    ``delete_page``
``session.purge``  ``purge_session``
``project.purge``  ``purge_project``
``workspace.purge`` ``purge_workspace``
``project.move``   ``move_project``
``session.move``   ``move_session``
``session.reorg``  ``move_session``
``workstream.delete`` ``delete_ledger``
=================  ==================

A dry run (``dry_run: true``) changes nothing and is never asked about. The webhooks of
``[[admission.webhooks]]`` that list the operation are called in declaration order with::

    POST <url>  {"operation", "op", "workspace", "project", "actor", "payload", "request_id"}

and answer 2xx ``{"allowed": true}`` or ``{"allowed": false, "reason": "..."}``. The first
refusal stops: ``AdmissionRefusedError`` (409 ``admission_refused``, the webhook's reason as
the message; a JSON-RPC error over MCP). A webhook that cannot answer (connection error, past
``timeout_s``, non-2xx, no boolean ``allowed``) is a *failure*: ``on_failure = "reject"``
refuses the operation the same way; ``"allow"`` logs it, counts it
(``aimem_admission_failures_total``) and goes on to the next webhook.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from typing import Any

import httpx

from aimem_common.config import AdmissionWebhook, Settings
from aimem_common.errors import AdmissionRefusedError

log = logging.getLogger("aimem.admission")

OPERATIONS: dict[str, str] = {
    "page.delete": "delete_page",
    "session.purge": "purge_session",
    "project.purge": "purge_project",
    "workspace.purge": "purge_workspace",
    "project.move": "move_project",
    "session.move": "move_session",
    "session.reorg": "move_session",
    "workstream.delete": "delete_ledger",
}
REASON_MAX = 500

_metrics: "weakref.WeakKeyDictionary[Any, tuple[Any, Any]]" = weakref.WeakKeyDictionary()


def _counters(telemetry: Any) -> tuple[Any, Any] | None:
    """(decisions, failures) counters in ``telemetry``'s registry, created once per registry."""
    if telemetry is None:
        return None
    got = _metrics.get(telemetry)
    if got is None:
        got = (
            telemetry.counter("aimem_admission_decisions_total",
                              "Admission decisions on destructive operations", ["operation", "decision"]),
            telemetry.counter("aimem_admission_failures_total",
                              "Admission webhooks that could not answer (dead, slow, bad answer)",
                              ["operation", "policy"]),
        )
        _metrics[telemetry] = got
    return got


async def admit(
    settings: Settings,
    op: str,
    payload: dict[str, Any],
    *,
    workspace: str | None,
    project: str | None,
    actor: str | None,
    telemetry: Any = None,
) -> None:
    """Ask the configured webhooks whether ``op`` may run; return when it may.

    A no-op for ops that are not governed, for dry runs and when no webhook lists the
    operation (the default: no ``[admission]``).

    Raises:
        AdmissionRefusedError: a webhook refused, or failed under ``on_failure = "reject"``.
    """
    operation = OPERATIONS.get(op)
    if operation is None or payload.get("dry_run"):
        return
    hooks = [(i, h) for i, h in enumerate(settings.admission.webhooks) if operation in h.operations]
    if not hooks:
        return
    counters = _counters(telemetry)
    body = {"operation": operation, "op": op, "workspace": workspace, "project": project, "actor": actor,
            "payload": payload, "request_id": uuid.uuid4().hex}
    for index, hook in hooks:
        try:
            allowed, reason = await _ask(hook, body)
        except _HookFailure as exc:
            log.warning("admission webhook #%d (%s) failed: %s; policy %s", index, operation, exc, hook.on_failure)
            if counters:
                counters[1].labels(operation, hook.on_failure).inc()
            if hook.on_failure == "allow":
                continue
            if counters:
                counters[0].labels(operation, "refused").inc()
            raise AdmissionRefusedError(
                f"{operation} refused: admission webhook #{index} could not answer ({exc})",
                data={"operation": operation, "webhook": index, "failure": True},
            ) from None
        if not allowed:
            if counters:
                counters[0].labels(operation, "refused").inc()
            log.info("admission webhook #%d refused %s by %s: %s", index, operation, actor, reason)
            raise AdmissionRefusedError(reason or f"{operation} refused by admission webhook #{index}",
                                        data={"operation": operation, "webhook": index})
    if counters:
        counters[0].labels(operation, "allowed").inc()


class _HookFailure(Exception):
    """The webhook gave no usable answer."""


async def _ask(hook: AdmissionWebhook, body: dict[str, Any]) -> tuple[bool, str]:
    try:
        async with httpx.AsyncClient(timeout=hook.timeout_s, follow_redirects=False) as client:
            resp = await client.post(hook.url, json=body, headers={"User-Agent": "aimem-admission", **hook.headers})
    except httpx.TimeoutException:
        raise _HookFailure(f"no answer within {hook.timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise _HookFailure(type(exc).__name__) from None
    if not 200 <= resp.status_code < 300:
        raise _HookFailure(f"HTTP {resp.status_code}")
    try:
        data = resp.json()
    except ValueError:
        raise _HookFailure("answer is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("allowed"), bool):
        raise _HookFailure("answer has no boolean 'allowed'")
    return data["allowed"], str(data.get("reason") or "")[:REASON_MAX]
