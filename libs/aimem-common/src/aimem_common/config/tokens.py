"""The root token file ``<data_dir>/auth/token``: where it is, reading it, making it once."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from aimem_common.errors import ConfigError

log = logging.getLogger("aimem.config")


def token_path(data_dir: Path) -> Path:
    """``<data_dir>/auth/token``: the root token ``aimem up`` generates when none is configured."""
    return Path(data_dir) / "auth" / "token"


def read_token_file(data_dir: Path) -> str | None:
    """Return the token in ``token_path(data_dir)`` (stripped), or None when absent, empty or
    unreadable (another user's data dir: the server then answers 401, which says why)."""
    try:
        return token_path(data_dir).read_text("utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def ensure_token_file(data_dir: Path) -> tuple[str, bool]:
    """Return ``(token, created)``: the token of ``token_path(data_dir)``, generating it first
    when absent (32 random bytes, URL-safe; the file is created with mode 0600 and never
    rewritten; a file readable by others is narrowed to 0600).

    Raises:
        ConfigError: the file cannot be created or read.
    """
    path = token_path(data_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
                log.warning("%s was readable by others; its mode is now 0600", path)
            token = path.read_text("utf-8").strip()
            if not token:
                raise ConfigError(f"{path} is empty: delete it to generate a new token") from None
            return token, False
        token = secrets.token_urlsafe(32)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return token, True
    except OSError as exc:
        raise ConfigError(f"cannot create the auth token {path}: {exc.strerror or exc}") from exc
