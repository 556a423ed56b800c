"""Fixtures shared by the e2e modules that drive the real agent CLIs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
