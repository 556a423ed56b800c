"""The command envelope and the op registry.

Envelope JSON (DESIGN.md): ``{v, cmd_id, op, issued_at, actor, scope:{workspace, project},
idempotency_key?, payload}``. ``scope`` names are validated; the writer resolves them to
ids (creating them only for ops that may create a scope).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Callable, TypeVar

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer,
                      model_validator)

from aimem_common.errors import BadRequestError
from aimem_common.models import validate_name

ENVELOPE_VERSION = 1


SQL_INT_MIN, SQL_INT_MAX = -(2**63), 2**63 - 1


class OpPayload(BaseModel):
    """Base of every op payload: unknown fields are refused so typos surface.

    Integer fields (ids, counts) must fit SQLite's 64-bit INTEGER, or binding them fails
    inside the writer's transaction.
    """

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _ints_fit_sqlite(self) -> "OpPayload":
        for name, value in self.__dict__.items():  # the fields (extra="forbid": nothing else)
            if isinstance(value, int) and not isinstance(value, bool) and not SQL_INT_MIN <= value <= SQL_INT_MAX:
                raise ValueError(f"{name} is out of range (a 64-bit integer)")
        return self


OP_MODELS: dict[str, type[OpPayload]] = {}
OP_CREATES_SCOPE: dict[str, bool] = {}

P = TypeVar("P", bound=type[OpPayload])


def register(name: str, *, creates_scope: bool = False) -> Callable[[P], P]:
    """Register a payload model under op ``name`` (``domain.verb``).

    Raises:
        ValueError: ``name`` is already registered (caught at import time).
    """

    def deco(model: P) -> P:
        if name in OP_MODELS:
            raise ValueError(f"duplicate op name {name!r}")
        OP_MODELS[name] = model
        OP_CREATES_SCOPE[name] = creates_scope
        return model

    return deco


class ScopeRef(BaseModel):
    """Workspace/project names of a command (the writer maps them to ids).

    Hook commands may add the project's identity keys, resolved by the hook client where
    the files are: ``root`` (the repository's top level) and ``origin`` (its normalised
    ``origin`` URL), and ``repo_id`` (the repository's stable id, which a moved checkout
    keeps). With keys, the writer finds the project by them and gives a second
    repository that wants a taken name a distinct one (``api`` → ``api-2``); ``explicit``
    (a name from a ``.aimem.toml`` marker) resolves by name alone and only records keys.
    """

    model_config = ConfigDict(extra="forbid")

    workspace: str = "default"
    project: str
    root: str | None = Field(None, max_length=4096)
    origin: str | None = Field(None, max_length=1024)
    explicit: bool = False
    repo_id: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")

    @model_serializer(mode="wrap")
    def _compact(self, handler: Any) -> dict[str, Any]:
        # Identity fields only when set: plain scopes stay {workspace, project} on the wire.
        data = handler(self)
        for name, empty in (("root", None), ("origin", None), ("explicit", False), ("repo_id", None)):
            if data.get(name, empty) == empty:
                data.pop(name, None)
        return data

    @property
    def keyed(self) -> bool:
        """True when the writer should resolve this scope by identity keys."""
        return not self.explicit and bool(self.root or self.origin)

    @field_validator("workspace")
    @classmethod
    def _ws(cls, v: str) -> str:
        return validate_name(v, "workspace")

    @field_validator("project")
    @classmethod
    def _pj(cls, v: str) -> str:
        return validate_name(v, "project")


class Envelope(BaseModel):
    """One command on ``aimem.mut.<op>``."""

    model_config = ConfigDict(extra="forbid")

    v: int = ENVELOPE_VERSION
    cmd_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    op: str
    issued_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    actor: str = "anonymous"
    scope: ScopeRef | None = None
    idempotency_key: str | None = Field(None, max_length=200)
    payload: dict[str, Any] = {}

    @property
    def dedupe_id(self) -> str:
        """The ``Nats-Msg-Id``: the idempotency key when given, else the cmd_id."""
        return self.idempotency_key or self.cmd_id


def parse_payload(op: str, payload: dict[str, Any] | OpPayload) -> OpPayload:
    """Validate ``payload`` with the model registered for ``op`` (an instance of that model
    is returned as it is).

    Raises:
        BadRequestError: unknown op (``unknown_op``) or invalid payload (``invalid_payload``,
            the first pydantic error in the message).
    """
    model = OP_MODELS.get(op)
    if model is None:
        raise BadRequestError(f"unknown op {op!r}", code="unknown_op")
    if type(payload) is model:
        return payload  # validated with its envelope already (the writer's hook path)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise BadRequestError(f"invalid {op} payload: {first_error(exc)}", code="invalid_payload") from exc


def first_error(exc: ValidationError) -> str:
    """Render the first pydantic error as ``loc: msg`` (for one-line messages)."""
    errs = exc.errors()
    if not errs:
        return str(exc)
    e = errs[0]
    loc = ".".join(str(x) for x in e.get("loc", ())) or "body"
    return f"{loc}: {e.get('msg')}"


def make_envelope(
    op: str,
    payload: OpPayload | dict[str, Any],
    *,
    workspace: str | None = None,
    project: str | None = None,
    actor: str = "anonymous",
    idempotency_key: str | None = None,
    root: str | None = None,
    origin: str | None = None,
    explicit: bool = False,
    repo_id: str | None = None,
) -> Envelope:
    """Build a validated envelope for ``op`` (payload validated against its model).

    A payload given as an instance of the model registered for ``op`` was validated when it
    was built and is only dumped (validation done once, on the hook path too); a dict or
    another model is validated here.

    ``root``/``origin``/``explicit``/``repo_id``: the project identity of a hook command (``ScopeRef``).

    Raises:
        BadRequestError: unknown op, invalid payload or invalid scope names.
    """
    data = payload.model_dump(mode="json", exclude_none=False) if isinstance(payload, BaseModel) else payload
    model = OP_MODELS.get(op)
    if model is None or type(payload) is not model:
        parse_payload(op, data)
    try:
        scope = ScopeRef(workspace=workspace or "default", project=project, root=root, origin=origin,
                         explicit=explicit, repo_id=repo_id) if project else None
    except ValidationError as exc:
        raise BadRequestError(first_error(exc), code="invalid_name") from exc
    return Envelope(op=op, actor=actor, scope=scope, idempotency_key=idempotency_key, payload=data)
