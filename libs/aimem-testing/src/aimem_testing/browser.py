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


# -- helpers of the web tests ------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[4]
AXE_JS = Path(os.environ.get("AIMEM_AXE_JS", REPO / ".cache/npm/node_modules/axe-core/axe.min.js"))


def web_login(page: Any, base: str, name: str, password: str) -> None:
    """Log ``name`` in on ``base``'s ``/web/login`` password form; wait for the projects screen."""
    import re

    page.goto(f"{base}/web/login")
    page.fill("#name", name)
    page.fill("#password", password)
    page.locator("form[aria-labelledby=pw-h] button").click()
    page.wait_for_url(re.compile(r".*/web/projects$"))


def web_login_root(page: Any, base: str, token: str) -> None:
    """Log in on ``base``'s ``/web/login`` key form with the root ``token``."""
    import re

    page.goto(f"{base}/web/login")
    page.fill("#token", token)
    page.locator("form[aria-labelledby=key-h] button").click()
    page.wait_for_url(re.compile(r".*/web/projects$"))


def axe_check(page: Any, name: str) -> None:
    """Inject axe-core (``AXE_JS``; the context needs ``bypass_csp=True``) and fail on any
    serious or critical violation."""
    page.add_script_tag(path=str(AXE_JS))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    bad = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in result["violations"]
           if v["impact"] in ("serious", "critical")]
    assert not bad, f"{name}: {bad}"
