"""The root token ``aimem up`` generates: ``<data_dir>/auth/token``, read by ``config.load``
when nothing else configures one (an explicit env or config.toml token always wins)."""

from __future__ import annotations

import stat

import pytest

from aimem_common import config
from aimem_common.service import check_bind


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generated_once_owner_only_and_never_rewritten(tmp_path) -> None:
    token, created = config.ensure_token_file(tmp_path)
    path = config.token_path(tmp_path)
    assert created and len(token) >= 40 and path.read_text().strip() == token
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert config.ensure_token_file(tmp_path) == (token, False)
    path.chmod(0o644)  # copied around by hand: narrowed again, the token kept
    assert config.ensure_token_file(tmp_path) == (token, False) and mode(path) == 0o600
    assert config.ensure_token_file(tmp_path / "other")[0] != token


def test_an_empty_token_file_is_one_clear_error(tmp_path) -> None:
    config.token_path(tmp_path).parent.mkdir()
    config.token_path(tmp_path).write_text("\n")
    with pytest.raises(config.ConfigError, match="empty"):
        config.ensure_token_file(tmp_path)


def test_load_reads_it_and_an_explicit_token_wins(tmp_path) -> None:
    assert config.load(tmp_path, environ={}).auth.token is None
    token, _ = config.ensure_token_file(tmp_path)
    assert config.load(tmp_path, environ={}).auth.token == token
    assert config.load(tmp_path, environ={"AIMEM_AUTH__TOKEN": "from-env"}).auth.token == "from-env"
    (tmp_path / "config.toml").write_text('[auth]\ntoken = "from-config"\n')
    assert config.load(tmp_path, environ={}).auth.token == "from-config"


def test_with_the_generated_token_a_public_bind_is_allowed(tmp_path) -> None:
    with pytest.raises(config.ConfigError, match="without auth"):
        check_bind(config.load(tmp_path, environ={}), "0.0.0.0")
    config.ensure_token_file(tmp_path)
    check_bind(config.load(tmp_path, environ={}), "0.0.0.0")
