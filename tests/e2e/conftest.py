"""Fixtures shared by the e2e modules that drive the real agent CLIs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aimem_testing.agents import AgentsUnavailable, ensure_agents, ensure_more_agents
from aimem_testing.stack import LocalStack


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One whole local stack for the module (each test uses its own repository, so its own
    project); stopped, with every process it started, when the module is done."""
    base = tmp_path_factory.mktemp("stack")
    stack = LocalStack(base / "data", base / "logs").start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def bins() -> tuple[Path, Path]:
    """(the first three's ``.bin`` with Node, the ``.bin`` of Pi and Copilot CLI), installed on
    first use, then cached."""
    try:
        return ensure_agents(), ensure_more_agents()
    except AgentsUnavailable as exc:  # a failure, not a skip: CI installs npm for this
        pytest.fail(f"the real agent CLIs are not installable here: {exc}")
