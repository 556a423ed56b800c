"""A real browser for tests: Playwright driving Debian's Chromium (never a downloaded one).

``require(ok, reason)`` fails the test in CI (``CI=true``, set by ``.ci/run``) and skips it
elsewhere when a browser part is missing; ``chromium(*extra_args)`` yields a launched
browser after checking Playwright and the Chromium binary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("AIMEM_TEST_CHROMIUM", "/usr/bin/chromium")  # Debian's; never a downloaded browser
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]


def require(ok: bool, reason: str) -> None:
    """Fail (in CI) or skip (elsewhere) with ``reason`` unless ``ok``."""
    if ok:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI=true: browser tests must run)", pytrace=False)
    pytest.skip(reason)


@contextmanager
def chromium(*extra_args: str) -> Iterator[Any]:
    """Yield a Playwright ``Browser`` (Chromium, headless) with ``ARGS`` plus ``extra_args``."""
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
    require(sync_api is not None, "playwright is not installed: pip install -r requirements-dev.txt")
    require(Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK),
            f"Debian's chromium is missing at {CHROMIUM}: apt-get install -y chromium (.ci/run does)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*ARGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()
