"""Shared pytest fixtures: a real nats-server per test, temp data dirs, settings, the stack.

Every process a fixture starts is stopped in its teardown; ports are free ports, so the
suite can run twice at once on one machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import pytest_asyncio

from aimem_common import config
from aimem_common.natsserver import NatsServer
from aimem_testing.stack import LocalStack as Stack
from aimem_testing.stack import ServiceProc, free_port_block

REPO = Path(__file__).resolve().parent
SHARED = REPO.parent / "shared"
# Test-support knobs a run may set on purpose: they steer the tests, not aimem.
TEST_KNOBS = ("AIMEM_AGENTS_CACHE", "AIMEM_AXE_JS", "AIMEM_WEB_SCREENSHOTS")
TEST_KNOB_PREFIXES = ("AIMEM_TEST_", "AIMEM_FUZZ_", "AIMEM_MODEL_")  # AIMEM_MODEL_*: the lifecycle model run


def _is_aimem_setting(name: str) -> bool:
    """True for an ``AIMEM_*`` variable that configures aimem itself (not a test knob)."""
    return (name.startswith("AIMEM_") and name not in TEST_KNOBS
            and not name.startswith(TEST_KNOB_PREFIXES))


@pytest.fixture(scope="session", autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory):
    """Run every test away from the user's folder, home and aimem settings.

    ``make up`` leaves ``./data`` (with its own root token) in the repository, a user may
    have ``AIMEM_*`` settings in their shell and hook-client files in their home: the CLI
    and the services would pick up any of them. For the whole session this fixture

    * drops every ``AIMEM_*`` setting (test knobs such as ``AIMEM_AGENTS_CACHE`` stay);
    * points ``HOME`` at an empty folder and drops ``XDG_DATA_HOME``/``XDG_CONFIG_HOME``/
      ``XDG_STATE_HOME`` (the hook client's data dir, spool and tokens live there), keeping
      the agent-CLI and npm caches where they are, and gives git an identity of its own;
    * makes an empty folder the working directory, so a relative ``./data`` is never the
      repository's (tests name repository files through ``REPO``, never relative paths).
    """
    from aimem_testing.agents import cache_root

    agents_cache = str(cache_root())  # resolved with the real HOME, before it moves
    npm_cache = os.environ.get("npm_config_cache") or str(Path.home() / ".npm")
    home = tmp_path_factory.mktemp("home")
    work = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if _is_aimem_setting(n)]:
            mp.delenv(name)
        for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
            mp.delenv(name, raising=False)
        mp.setenv("HOME", str(home))
        mp.setenv("AIMEM_AGENTS_CACHE", agents_cache)
        mp.setenv("npm_config_cache", npm_cache)
        for role in ("AUTHOR", "COMMITTER"):
            mp.setenv(f"GIT_{role}_NAME", os.environ.get(f"GIT_{role}_NAME", "aimem tests"))
            mp.setenv(f"GIT_{role}_EMAIL", os.environ.get(f"GIT_{role}_EMAIL", "tests@aimem.invalid"))
        mp.chdir(work)
        yield home


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` beside the repo; skips the test with a reason when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared (fixtures and data) is not present beside the repo")
    return SHARED


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def nats_server(tmp_path: Path):
    """A real ``nats-server -js`` on a free port with its store in ``tmp_path``."""
    with NatsServer(tmp_path / "nats-store") as server:
        yield server


@pytest.fixture
def settings(data_dir: Path, nats_server: NatsServer) -> config.Settings:
    """Settings for one test: temp data dir, the test's NATS, free service ports."""
    return config.load(data_dir, environ={}, bus={"nats_url": nats_server.url}, port_base=free_port_block())


@pytest.fixture
def stack(tmp_path: Path):
    """A running local stack with its own data dir, ports and NATS; stopped after the test."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    s = Stack(tmp_path / "data", log_dir).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def services(settings: config.Settings, tmp_path: Path):
    """Factory: ``services("writer", "query")`` starts real service processes (stopped after).

    Returns a dict name -> ServiceProc. Start the writer first: readers wait for its schema.
    """
    started: list[ServiceProc] = []
    log_dir = tmp_path / "logs"
    log_dir.mkdir(exist_ok=True)

    def start(*names: str, extra_env: dict[str, str] | None = None) -> dict[str, ServiceProc]:
        out = {}
        for name in names:
            proc = ServiceProc(settings, name, log_dir, extra_env).start()
            started.append(proc)
            out[name] = proc
        return out

    try:
        yield start
    finally:
        for proc in reversed(started):
            proc.stop()


@pytest_asyncio.fixture
async def bus(settings: config.Settings):
    """A connected ``aimem_common.bus.Bus`` on the test's NATS (streams ensured)."""
    from aimem_common import bus as busmod

    nc = await busmod.connect(settings.bus, name="test", reconnect=False)
    await busmod.ensure_streams(nc.jetstream(), settings.bus)
    try:
        yield busmod.Bus(nc, settings.bus)
    finally:
        await nc.close()


@pytest.fixture
def fake_llm():
    """An OpenAI-compatible test LLM server over real HTTP (``aimem_testing.fake_llm``).

    Point a service at ``fake_llm.url``; steer it with ``.mode`` / ``.script`` / ``.answers``.
    """
    from aimem_testing.fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server
