"""``load``: the one config-read path (DESIGN.md invariant 1).

``load()`` resolves, in order of precedence: environment ``AIMEM_*`` (nested sections with
``__``, e.g. ``AIMEM_DECAY__LAMBDA=0.05``) > ``<data_dir>/config.toml`` > defaults. Call it
once per process, in ``main()``/``create_app()``, and pass the ``Settings`` object down; no
other module reads ``os.environ`` (``child_environ`` hands a copy to child processes).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic_settings import PydanticBaseSettingsSource, TomlConfigSettingsSource

from aimem_common.config.settings import Settings
from aimem_common.config.tokens import read_token_file
from aimem_common.errors import ConfigError
from aimem_common.runstate import running_overrides

log = logging.getLogger("aimem.config")


def load(
    data_dir: str | Path | None = None,
    *,
    environ: dict[str, str] | None = None,
    check_writable: bool = True,
    **overrides: Any,
) -> Settings:
    """Load the settings: env ``AIMEM_*`` > ``<data_dir>/config.toml`` > defaults.

    While an ``aimem up`` runs on the data dir, the port base and NATS URL it was started
    with (``<data_dir>/run/up.json``, ``aimem_common.runstate``) come before ``config.toml``
    (the environment still wins), so every client of the data dir reaches that stack.

    Args:
        data_dir: explicit data dir (a CLI flag); beats ``AIMEM_DATA_DIR``.
        environ: the environment to read (default ``os.environ``; tests pass a dict).
        check_writable: create the data dir and fail fast when it is not writable.
        overrides: highest-precedence values (CLI flags), e.g. ``port_base=9000``.

    Returns the ``Settings`` with ``data_dir`` absolute.

    Raises:
        ConfigError: unwritable data dir, unreadable/invalid config.toml, bad values.
    """
    env = dict(os.environ if environ is None else environ)
    raw_dir = Path(data_dir or env.get("AIMEM_DATA_DIR") or "data").expanduser()
    abs_dir = raw_dir.resolve()
    if check_writable:
        _ensure_writable(abs_dir)
    toml_file = abs_dir / "config.toml"

    toml_source = toml_file if toml_file.is_file() else None

    class _Bound(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            if toml_source is not None:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_source))
            return tuple(sources)

    old_env = None
    if environ is not None:
        # pydantic-settings reads os.environ; swap it for the duration of the parse.
        old_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
    # A running `aimem up` of this data dir may run on ports its command line chose.
    running = {k: v for k, v in running_overrides(abs_dir, env).items() if k not in overrides}
    try:
        settings = _Bound(**{"data_dir": abs_dir, **running, **overrides})
    except Exception as exc:  # pydantic ValidationError or a TOML decode error
        first = str(exc).strip().splitlines()
        raise ConfigError(f"invalid configuration ({toml_file}): {' '.join(first[:3])}") from exc
    finally:
        if old_env is not None:
            os.environ.clear()
            os.environ.update(old_env)
    resolved = {}
    for cand in settings.llm_fallbacks:
        if cand.api_key_env:
            value = env.get(cand.api_key_env)
            if not value:
                raise ConfigError(
                    f"[[llm_fallbacks]] {cand.provider}/{cand.model}: env {cand.api_key_env} is empty"
                )
            resolved[cand.api_key_env] = value
    for mirror in settings.mirrors:
        if mirror.secret_env:
            if not env.get(mirror.secret_env):
                raise ConfigError(f"[[mirrors]] {mirror.url}: env {mirror.secret_env} is empty")
            resolved[mirror.secret_env] = env[mirror.secret_env]
    if settings.llm.provider and not settings.llm.api_key:
        vendor_env = {"anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
        names = (*vendor_env.get(settings.llm.provider, ("OPENAI_API_KEY",)), "LLM_API_KEY")
        key = next((env[n] for n in names if env.get(n)), None)
        if key:
            settings.llm.api_key = key
    settings.resolved_env = resolved
    if settings.auth.token is None:
        settings.auth.token = read_token_file(abs_dir)
    if settings.bus.token is None:
        settings.bus.token = settings.auth.token
    log.info("aimem data dir: %s", abs_dir)
    return settings


def child_environ() -> dict[str, str]:
    """Return a copy of this process's environment, for the child processes it starts
    (Litestream, git, services): the one other place besides ``load`` that reads it."""
    return dict(os.environ)


def _ensure_writable(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".aimem-probe-"):
            pass
    except OSError as exc:
        raise ConfigError(f"data dir {path} is not writable: {exc.strerror or exc}") from exc
