"""Every error type aimem raises on purpose, and their wire shape.

Each error carries a stable ``code`` (snake_case, part of the API), an HTTP ``status``
and optional structured ``data``. One mapper per transport turns them into a response:
HTTP (``aimem_common.http``), MCP (JSON-RPC, in the gateway), the CLI (one line, exit 1)
and writer replies on the bus (``to_dict``/``from_dict``). Catch by type, never by text.

Wire shape (HTTP body, bus reply ``error`` field)::

    {"error": {"code": "not_found", "message": "page 'x.md' not found", "data": {...}}}
"""

from __future__ import annotations

from typing import Any


class AimemError(Exception):
    """Base of every aimem error: ``code`` (str), ``status`` (HTTP int), ``data`` (dict|None)."""

    code: str = "internal"
    status: int = 500
    #: Seconds for the HTTP ``Retry-After`` header (set on 429/503/507 answers), or None.
    retry_after_s: int | None = None

    def __init__(self, message: str, *, code: str | None = None, data: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"code", "message"[, "data"]}`` (the inside of the ``error`` envelope)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            out["data"] = self.data
        return out

    def envelope(self) -> dict[str, Any]:
        """Return the full JSON body ``{"error": {...}}``."""
        return {"error": self.to_dict()}


class BadRequestError(AimemError):
    """Input is malformed or breaks a documented limit (400)."""

    code, status = "bad_request", 400


class UnauthorizedError(AimemError):
    """No or unknown credential (401)."""

    code, status = "unauthorized", 401


class ForbiddenError(AimemError):
    """Credential known but not allowed for this scope/route (403)."""

    code, status = "forbidden", 403


class NotFoundError(AimemError):
    """Workspace, project, page, session, handoff or message does not exist (404)."""

    code, status = "not_found", 404


class ConflictError(AimemError):
    """The target exists or is in a state that forbids the operation (409)."""

    code, status = "conflict", 409


class AdmissionRefusedError(ConflictError):
    """An ``[admission]`` webhook refused the operation, or failed under ``on_failure = "reject"``
    (409); ``message`` is the webhook's reason. Nothing was changed."""

    code, status = "admission_refused", 409


class GoneError(AimemError):
    """What the request belongs to was purged and stays purged (410): a purged session's late
    hook. Final for a client: retrying can never succeed (the hook client drops the event)."""

    code, status = "purged", 410


class UnprocessableError(AimemError):
    """Well-formed input the operation cannot accept: a taken or invalid new name, a
    same-workspace move, a bad page path for restore (422)."""

    code, status = "unprocessable", 422


class PreconditionFailedError(AimemError):
    """A conditional write lost: ``create_only`` or ``expected_page_id`` did not hold (412).

    ``data`` carries ``current_page_id`` (int|None) so the caller can re-read and retry.
    """

    code, status = "precondition_failed", 412


class ConfigError(AimemError):
    """Configuration cannot be used (unwritable data dir, bad value); fail fast at start."""

    code, status = "config_error", 500


class PayloadTooLargeError(AimemError):
    """Request or field over its byte cap (413)."""

    code, status = "payload_too_large", 413


class BackPressureError(AimemError):
    """The bus is saturated (stream full or writer lag over the bound) (429).

    ``retry_after_s`` is the hint the HTTP layer puts in ``Retry-After``.
    """

    code, status = "back_pressure", 429

    def __init__(self, message: str, *, retry_after_s: int = 1, data: dict[str, Any] | None = None):
        super().__init__(message, data=data)
        self.retry_after_s = retry_after_s


class UnavailableError(AimemError):
    """A dependency (NATS, the DB, an LLM provider) cannot be reached (503, ``Retry-After: 2``)."""

    code, status = "unavailable", 503
    retry_after_s = 2


class BusTimeoutError(AimemError):
    """A request/reply over the bus got no answer in time (504); the command may still apply."""

    code, status = "timeout", 504


class RetryableError(AimemError):
    """Transient failure inside the writer: the message is nak'ed and redelivered."""

    code, status = "retryable", 503


class StoreFaultError(RetryableError):
    """The writer's store refused a write (disk full, I/O error, read-only file) (503).

    Never a reason to drop a command: the writer keeps the batch, retries it with backoff
    and reports itself unhealthy until the store accepts writes again. ``data.reason`` is
    ``disk_full`` or ``io_error``.
    """

    code, status = "store_fault", 503


class InsufficientStorageError(AimemError):
    """The writer cannot store anything because its disk is full (507, with ``Retry-After``)."""

    code, status = "insufficient_storage", 507

    def __init__(self, message: str, *, retry_after_s: int = 5, data: dict[str, Any] | None = None):
        super().__init__(message, data=data)
        self.retry_after_s = retry_after_s


class PermanentError(AimemError):
    """A command that can never apply: answered with an error and acked (terminated)."""

    code, status = "permanent", 422


class LlmNotConfiguredError(AimemError):
    """The job needs an LLM provider and none is configured (zero-LLM default) (503)."""

    code, status = "llm_not_configured", 503


class LlmUnavailableError(UnavailableError):
    """Every LLM candidate failed transiently (429/5xx/timeout/connection) or is open (503)."""

    code, status = "llm_unavailable", 503


class LlmOutputError(AimemError):
    """The model answered, but not with JSON matching the requested schema (502)."""

    code, status = "llm_output_invalid", 502


class LlmRequestError(AimemError):
    """The provider refused the request deterministically (4xx other than 429) (502)."""

    code, status = "llm_request_failed", 502


_BY_CODE: dict[str, type[AimemError]] = {
    cls.code: cls
    for cls in (
        BadRequestError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError, GoneError,
        AdmissionRefusedError,
        UnprocessableError, PreconditionFailedError, PayloadTooLargeError, BackPressureError, UnavailableError,
        BusTimeoutError, RetryableError, StoreFaultError, InsufficientStorageError, PermanentError, LlmNotConfiguredError,
        LlmUnavailableError, LlmOutputError, LlmRequestError,
    )
}


def from_dict(err: dict[str, Any]) -> AimemError:
    """Rebuild a typed error from ``{"code", "message", "data"?}`` (a writer reply).

    Unknown codes become a plain ``AimemError`` that keeps the code; the status then
    comes from ``status`` (a bus reply carries it) or ``data.status``, else 500.
    """
    code = str(err.get("code") or "internal")
    message = str(err.get("message") or code)
    data = err.get("data")
    cls = _BY_CODE.get(code)
    if cls is None:
        e = AimemError(message, code=code, data=data)
        if isinstance(err.get("status"), int):
            e.status = err["status"]
        elif isinstance(data, dict) and isinstance(data.get("status"), int):
            e.status = data["status"]
        return e
    return cls(message, data=data)
