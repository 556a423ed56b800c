"""Web-login ops: set a user's password, open and close a browser session.

The query service makes every secret into a digest before it travels: an argon2id hash
for a password, a sha256 hex for a session token and for the root token's fingerprint.
Nothing here carries a plaintext credential.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from aimem_common.commands.envelope import OpPayload, register

_SHA256 = r"^[0-9a-f]{64}$"


@register("user.passwd")
class UserPasswd(OpPayload):
    """Set (or with ``password_hash: null`` clear) ``name``'s password; ends that user's
    web sessions. Result ``{"name", "sessions_ended": int, "password_changed_at"}``."""

    name: str = Field(min_length=1, max_length=64)
    password_hash: str | None = Field(None, pattern=r"^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$",
                                      max_length=512)


@register("websession.create")
class WebSessionCreate(OpPayload):
    """Open a web session for exactly one subject: ``user`` (password or ``api_key_id``
    login) or the root token (``root_fp``). ``expires_at`` is RFC 3339 UTC.

    Result ``{"user_id": int|None, "expires_at"}``. Expired sessions are pruned on the way.
    """

    token_hash: str = Field(pattern=_SHA256)
    user: str | None = Field(None, min_length=1, max_length=64)
    api_key_id: int | None = Field(None, ge=1)
    root_fp: str | None = Field(None, pattern=_SHA256)
    expires_at: str = Field(min_length=20, max_length=40)
    client: str | None = Field(None, max_length=256)

    @model_validator(mode="after")
    def _one_subject(self) -> "WebSessionCreate":
        if (self.user is None) == (self.root_fp is None):
            raise ValueError("give exactly one of user or root_fp")
        if self.api_key_id is not None and self.user is None:
            raise ValueError("api_key_id needs user")
        return self


@register("websession.delete")
class WebSessionDelete(OpPayload):
    """Close one web session (logout; idempotent). Result ``{"deleted": bool}``."""

    token_hash: str = Field(pattern=_SHA256)
