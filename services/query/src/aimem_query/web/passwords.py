"""Password hashing for web logins: argon2id through argon2-cffi (its default parameters).

Blocking by design (tens of milliseconds of CPU and 64 MiB per hash): call these from a
worker thread (``asyncio.to_thread``), never on the event loop.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()
# Verified when the user name is unknown or has no password, so a wrong name costs the same
# time as a wrong password (no user enumeration by timing).
_DUMMY = _HASHER.hash("aimem-no-such-user")


def hash_password(password: str) -> str:
    """Return the encoded argon2id hash (``$argon2id$v=19$m=...``) of ``password``."""
    return _HASHER.hash(password)


def verify_password(encoded: str | None, password: str) -> bool:
    """Return True when ``password`` matches ``encoded`` (None: no password set → False)."""
    try:
        return _HASHER.verify(encoded or _DUMMY, password) and encoded is not None
    except (VerificationError, InvalidHashError):
        return False
