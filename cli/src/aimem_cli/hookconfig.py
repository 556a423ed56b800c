"""The hook client's configuration, read without pydantic (stdlib only).

The one config read outside ``aimem_common.config.load`` (allowed for speed: pydantic alone
costs ~100 ms to import); ``aimem import`` and the operator commands read it too. The
ingress URL: ``--ingress-url`` (what ``install-hooks``
writes into the hook command for a stack on another port; spooled entries keep it), else
``AIMEM_INGRESS_URL``, else
``ingress_url`` in ``<data_dir>/config.toml``, else the ingress of the ``aimem up`` running on
``<data_dir>`` (its ``run/up.json`` port base, so a stack started with ``--port-base`` is
found), else ``http://127.0.0.1:8701``; the bearer
token from ``AIMEM_AUTH__TOKEN``, else ``<data_dir>/auth/client-token`` (the root token or
user API key the installers wrote, mode 0600), else ``[auth] token``, else
``<data_dir>/auth/token`` (the root token ``aimem up`` generates when this is also the
server's data dir). ``<data_dir>`` is ``AIMEM_DATA_DIR``, else
``$XDG_DATA_HOME/aimem`` (``~/.local/share/aimem``): the user's data dir, never a path
relative to the agent's cwd. The spool lives in ``<data_dir>/spool/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8701"


def xdg_data_home() -> str | None:
    """``$XDG_DATA_HOME`` when set (the base of the users' data folders), else None."""
    return os.environ.get("XDG_DATA_HOME") or None


def client_data_dir(env: Any) -> Path:
    """Return the user's aimem data dir (``AIMEM_DATA_DIR`` or the XDG data home)."""
    if env.get("AIMEM_DATA_DIR"):
        return Path(env["AIMEM_DATA_DIR"]).expanduser().resolve()
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "aimem"


def client_settings(home: Path | None = None, *, installed: bool = False) -> tuple[Path, dict[str, str | None]]:
    """Return ``(data_dir, {"url", "token"})`` as this machine's hook client sees them
    (``aimem import`` posts with the same server and token as the hooks). With ``home`` (an
    installer's throwaway HOME), the default data dir is that home's. With ``installed``, as
    the installed hooks will see them: their commands carry neither ``AIMEM_DATA_DIR`` nor
    ``AIMEM_AUTH__TOKEN``, so this shell's values of those are not theirs."""
    env = dict(os.environ)
    if installed:
        env.pop("AIMEM_DATA_DIR", None)
        env.pop("AIMEM_AUTH__TOKEN", None)
    if home is not None and not env.get("AIMEM_DATA_DIR"):
        env["AIMEM_DATA_DIR"] = str(home / ".local" / "share" / "aimem")
    data_dir = client_data_dir(env)
    return data_dir, client_config(env, data_dir)


CLIENT_TOKEN = Path("auth") / "client-token"  # written by the installers (aimem_cli.installers.credentials)
SERVER_TOKEN = Path("auth") / "token"  # aimem_common.config.token_path: what `aimem up` generates


def read_secret(path: Path) -> str | None:
    """The stripped first line of a token file; None when absent, empty or unreadable."""
    try:
        return path.read_text("utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def client_config(env: Any, data_dir: Path) -> dict[str, str | None]:
    """Return ``{"url", "token"}`` from env, else ``<data_dir>``'s files, else defaults (the
    order is the module docstring's)."""
    url, token = env.get("AIMEM_INGRESS_URL"), env.get("AIMEM_AUTH__TOKEN")
    token = token or read_secret(data_dir / CLIENT_TOKEN)
    if not (url and token):
        toml = data_dir / "config.toml"
        if toml.is_file():
            import tomllib

            try:
                doc = tomllib.loads(toml.read_text("utf-8"))
            except (OSError, ValueError):
                doc = {}
            url = url or doc.get("ingress_url")
            auth = doc.get("auth")
            token = token or (auth.get("token") if isinstance(auth, dict) else None)
    token = token or read_secret(data_dir / SERVER_TOKEN)
    return {"url": str(url or running_ingress(data_dir) or DEFAULT_URL), "token": token}


def running_ingress(data_dir: Path) -> str | None:
    """The ingress URL of the ``aimem up`` running on ``data_dir`` (``run/up.json``'s port
    base: ingress is the stack's first port); None when none runs there or it recorded no base."""
    from aimem_common.runstate import read_record  # stdlib only: no pydantic on the hook path

    rec = read_record(data_dir)
    base = rec.get("port_base") if rec else None
    return f"http://127.0.0.1:{base}" if isinstance(base, int) and not isinstance(base, bool) else None


def hooks_setting(data_dir: Path, name: str) -> Any:
    """The value of ``[hooks] <name>`` in ``<data_dir>/config.toml`` (the hook client's own
    switches: ``transcript_tail``, ``backfill_on_start``); None when absent or unreadable."""
    toml = data_dir / "config.toml"
    if not toml.is_file():
        return None
    import tomllib

    try:
        hooks = tomllib.loads(toml.read_text("utf-8")).get("hooks")
    except (OSError, ValueError):
        return None
    return hooks.get(name) if isinstance(hooks, dict) else None
