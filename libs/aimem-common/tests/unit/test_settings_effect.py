"""No setting without effect: every settings field is read by the code, and a key the
original system had but this version does not implement fails the load with a clear error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from aimem_common import config

ROOT = Path(__file__).resolve().parents[4]
CONFIG_DIR = Path(config.__file__).resolve().parent  # the package that declares the settings


def _leaves(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaves(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", name


def _code() -> str:
    files = [p for pattern in ("libs/*/src/**/*.py", "services/*/src/**/*.py", "cli/src/**/*.py")
             for p in ROOT.glob(pattern) if CONFIG_DIR not in p.resolve().parents]
    assert len(files) > 50, "the source tree was not found"
    return "\n".join(p.read_text("utf-8") for p in files)


def _readme_configuration() -> str:
    text = (ROOT / "README.md").read_text("utf-8")
    start = text.index("\n## Configuration")
    end = text.find("\n## ", start + 5)
    return text[start:end if end > 0 else None]


def unused_settings() -> list[str]:
    """Dotted settings fields neither read outside the ``config`` package nor documented in README
    "Configuration" (read: ``.name`` or ``"name"`` in a source file)."""
    code, doc = _code(), _readme_configuration()
    out = []
    for dotted, name in _leaves(config.Settings):
        if dotted in ("resolved_env",):
            continue
        read = re.search(rf"\.{re.escape(name)}\b|[\"']{re.escape(name)}[\"']", code)
        documented = re.search(rf"^\s*{re.escape(name)}\s*=", doc, re.M)
        if not read and not documented:
            out.append(dotted)
    return out


def test_every_setting_is_read_or_documented():
    # Before issue 30 this found: query.max_limit, slots.per_user, auto_improve.pending_path,
    # retrieval.query_intent, retrieval.session_recall_bonus, retrieval.abstract_vectors,
    # llm.compat_strict.
    assert unused_settings() == []


@pytest.mark.parametrize(("section", "key", "value"), [
    ("retrieval", "query_intent", True),
    ("retrieval", "abstract_vectors", True),
    ("retrieval", "session_recall_bonus", 0.25),
    ("slots", "per_user", True),
    ("auto_improve", "pending_path", "_pending/auto-improve"),
])
def test_unsupported_key_fails_the_load(tmp_path, section, key, value):
    rendered = str(value).lower() if isinstance(value, bool) else repr(value).replace("'", '"')
    (tmp_path / "config.toml").write_text(f"[{section}]\n{key} = {rendered}\n")
    with pytest.raises(config.ConfigError, match=f"{key}.*not supported by this version"):
        config.load(tmp_path, environ={})


def test_unsupported_key_from_the_environment_fails_the_load(tmp_path):
    with pytest.raises(config.ConfigError, match="query_intent.*not supported"):
        config.load(tmp_path, environ={"AIMEM_RETRIEVAL__QUERY_INTENT": "true"})


@pytest.mark.parametrize(("section", "key"), [("retrieval", "query_intent"), ("retrieval", "abstract_vectors"),
                                             ("slots", "per_user")])
def test_the_value_this_version_behaves_as_is_accepted(tmp_path, section, key):
    (tmp_path / "config.toml").write_text(f"[{section}]\n{key} = false\n")
    s = config.load(tmp_path, environ={f"AIMEM_{section.upper()}__{key.upper()}": "false"})
    assert s.retrieval.rrf_k == 60


def test_max_limit_is_bounded(tmp_path):
    assert config.load(tmp_path, environ={"AIMEM_QUERY__MAX_LIMIT": "20"}).query.max_limit == 20
    with pytest.raises(config.ConfigError):
        config.load(tmp_path, environ={"AIMEM_QUERY__MAX_LIMIT": "0"})
