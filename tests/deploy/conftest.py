"""Fixtures of the deploy tests: the repo, the Compose v2 binary, a real Docker Engine, promtool."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).parent))  # dockerenv.py, promql.py beside this file (after the root conftest)

import dockerenv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def compose_bin() -> str:
    try:
        return dockerenv.compose_binary()
    except dockerenv.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def promtool() -> str:
    """``promtool`` (Debian's ``prometheus`` package, installed with apt when missing)."""
    found = shutil.which("promtool")
    if not found:
        try:
            dockerenv._apt_install("prometheus")
        except dockerenv.Unavailable as exc:
            pytest.skip(f"promtool unavailable: {exc}")
        found = shutil.which("promtool")
    if not found:
        pytest.skip("promtool not found after installing prometheus")
    return found


@pytest.fixture(scope="session")
def docker_engine():
    """A running Docker Engine and the local base image; dockerd is stopped if we started it."""
    work = Path(tempfile.mkdtemp(prefix="aimem-docker-"))
    engine = dockerenv.Docker(work)
    try:
        engine.ensure()
        engine.base_image_seconds = dockerenv.ensure_base_image(engine, work)
    except dockerenv.Unavailable as exc:
        engine.stop()
        pytest.skip(f"no Docker Engine here: {exc}")
    try:
        yield engine
    finally:
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)
