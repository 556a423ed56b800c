"""Fixtures of the web tests in a real browser: one Chromium per module, the screenshot folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aimem_testing.browser import AXE_JS, chromium, require


@pytest.fixture(scope="module")
def browser():
    """A launched Playwright Chromium (``aimem_testing.browser.chromium``) for the module; the
    test fails in CI and is skipped elsewhere when axe-core (injected by the accessibility
    checks) or the browser is missing."""
    require(AXE_JS.exists(), f"axe-core is missing at {AXE_JS}: npm install --prefix .cache/npm axe-core (.ci/run does)")
    with chromium() as b:
        yield b


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ``$AIMEM_WEB_SCREENSHOTS`` when set (kept), else a temp folder."""
    d = Path(os.environ.get("AIMEM_WEB_SCREENSHOTS") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d
