"""The op-handler registry: every catalogued op has exactly one handler."""

from __future__ import annotations

import pytest

from aimem_common.commands import OP_MODELS

import aimem_writer.ops  # noqa: F401
from aimem_writer import registry


def test_every_catalogued_op_has_a_handler() -> None:
    missing = sorted(set(OP_MODELS) - set(registry.handlers()))
    assert missing == [], f"ops without a writer handler: {missing}"


def test_handlers_use_the_catalogue_models() -> None:
    for op, h in registry.handlers().items():
        assert h.model is OP_MODELS[op]


def test_duplicate_handler_fails_at_registration() -> None:
    with pytest.raises(registry.DuplicateHandlerError):
        registry.handler("page.write")(lambda tx, env, cmd: {})


def test_unknown_op_cannot_be_registered() -> None:
    with pytest.raises(KeyError):
        registry.handler("no.such_op")(lambda tx, env, cmd: {})


def test_ops_package_loads_every_module() -> None:
    names = aimem_writer.ops.load_all()
    assert "aimem_writer.ops.pages" in names and "aimem_writer.ops.sessions" in names
