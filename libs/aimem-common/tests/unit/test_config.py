"""Config precedence: env AIMEM_* > <data_dir>/config.toml > defaults (DESIGN.md invariant 1)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from aimem_common import config


def write_toml(data_dir: Path, text: str) -> None:
    (data_dir / "config.toml").write_text(text)


def test_defaults_when_nothing_set(tmp_path: Path) -> None:
    s = config.load(tmp_path, environ={})
    assert s.decay.lambda_ == 0.02
    assert s.decay.cold_threshold == 0.20
    assert s.auto_improve.scheduler.interval_secs == 3600
    assert s.port("ingress") == 8701 and s.port("maintainer") == 8705
    assert s.data_dir == tmp_path.resolve()
    assert s.db_path == tmp_path.resolve() / "db" / "memory.sqlite"


def test_toml_beats_default(tmp_path: Path) -> None:
    write_toml(tmp_path, "[decay]\nlambda = 0.05\n[auto_improve.scheduler]\ninterval_secs = 60\n")
    s = config.load(tmp_path, environ={})
    assert s.decay.lambda_ == 0.05
    assert s.auto_improve.scheduler.interval_secs == 60
    assert s.decay.sigma == 0.6  # untouched keys keep defaults


def test_env_beats_toml(tmp_path: Path) -> None:
    write_toml(tmp_path, "log_level = 'warning'\n[decay]\nlambda = 0.05\n")
    s = config.load(tmp_path, environ={"AIMEM_DECAY__LAMBDA": "0.5", "AIMEM_LOG_LEVEL": "debug"})
    assert s.decay.lambda_ == 0.5
    assert s.log_level == "debug"


def test_data_dir_from_env_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = config.load(environ={"AIMEM_DATA_DIR": "rel/dir"})
    assert s.data_dir == (tmp_path / "rel" / "dir").resolve()
    assert s.data_dir.is_absolute() and s.data_dir.is_dir()


def test_environ_argument_does_not_leak(tmp_path: Path) -> None:
    before = dict(os.environ)
    config.load(tmp_path, environ={"AIMEM_LOG_LEVEL": "error"})
    assert dict(os.environ) == before


def test_unwritable_data_dir_fails_fast(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user that ignores permissions (root)")
        with pytest.raises(config.ConfigError, match="not writable"):
            config.load(ro / "data", environ={})
    finally:
        ro.chmod(stat.S_IRWXU)


def test_data_dir_is_a_file_fails_fast(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(config.ConfigError, match="not writable"):
        config.load(f, environ={})


def test_invalid_toml_is_one_line_error(tmp_path: Path) -> None:
    write_toml(tmp_path, "log_level = 'loud'\n")
    with pytest.raises(config.ConfigError, match="log_level"):
        config.load(tmp_path, environ={})


def test_llm_fallback_needs_its_key(tmp_path: Path) -> None:
    write_toml(
        tmp_path,
        "[[llm_fallbacks]]\nprovider = 'openai-compat'\nmodel = 'm'\nbase_url = 'http://x/v1'\napi_key_env = 'MY_KEY'\n",
    )
    with pytest.raises(config.ConfigError, match="MY_KEY"):
        config.load(tmp_path, environ={})
    s = config.load(tmp_path, environ={"MY_KEY": "k"})
    assert s.llm_fallbacks[0].model == "m" and s.resolved_env == {"MY_KEY": "k"}


def test_local_urls_follow_the_port_base_unless_set(tmp_path):
    """`make up PORT_BASE=9701` and `AIMEM_PORT_BASE=9701 aimem status` must meet."""
    s = config.load(tmp_path, environ={"AIMEM_PORT_BASE": "9701"})
    assert (s.ingress_url, s.server_url) == ("http://127.0.0.1:9701", "http://127.0.0.1:9702")
    s = config.load(tmp_path, environ={"AIMEM_PORT_BASE": "9701", "AIMEM_SERVER_URL": "https://mem.lan"})
    assert (s.ingress_url, s.server_url) == ("http://127.0.0.1:9701", "https://mem.lan")
    s = config.load(tmp_path, environ={})
    assert (s.ingress_url, s.server_url) == ("http://127.0.0.1:8701", "http://127.0.0.1:8702")


def test_mcp_session_idle_timeout(tmp_path: Path) -> None:
    assert config.load(tmp_path, environ={}).mcp.session_idle_timeout_s == 1800
    write_toml(tmp_path, "[mcp]\nsession_idle_timeout_s = 600\n")
    assert config.load(tmp_path, environ={}).mcp.session_idle_timeout_s == 600
    s = config.load(tmp_path, environ={"AIMEM_MCP__SESSION_IDLE_TIMEOUT_S": "90.5"})
    assert s.mcp.session_idle_timeout_s == 90.5
    for bad in ("0", "-5", "nan"):
        with pytest.raises(config.ConfigError, match="session_idle_timeout_s"):
            config.load(tmp_path, environ={"AIMEM_MCP__SESSION_IDLE_TIMEOUT_S": bad})
