"""Query-service test support: ``web_stack`` (the whole local stack, auth on, shared by a
web test module) and the helpers that seed it through its public APIs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest


# -- the web interface: a real writer + ingress + query with a root token, seeded over HTTP ----

WEB_ROOT_TOKEN = "web-root-token-for-tests"


@dataclass
class WebStack:
    """URLs of a running stack and helpers that seed it through its public APIs."""

    query: str
    ingress: str
    nats_url: str
    root_token: str = WEB_ROOT_TOKEN

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.query, timeout=30,
                            headers={"Authorization": f"Bearer {WEB_ROOT_TOKEN}"})

    def user(self, name: str, password: str, *grants: tuple[str, str, bool]) -> None:
        """Create ``name`` with a password and ``(workspace, project, can_write)`` grants."""
        with self.admin() as a:
            a.post("/admin/users", json={"name": name}).raise_for_status()
            a.put(f"/admin/users/{name}/password", json={"password": password}).raise_for_status()
            for ws, pj, write in grants:
                a.put("/admin/grants", json={"user": name, "workspace": ws, "project": pj,
                                             "can_write": write}).raise_for_status()

    def page(self, project: str, path: str, body: str, **extra) -> dict:
        with self.admin() as a:
            r = a.post("/admin/pages", json={"project": project, "path": path, "body": body, **extra})
            r.raise_for_status()
            return r.json()

    def hook(self, project: str, session_id: str, event: str, **fields) -> None:
        body = {"session_id": session_id, "cwd": f"/home/dev/{project}", "hook_event_name": event,
                "workspace": "default", "project": project, **fields}
        r = httpx.post(f"{self.ingress}/hook?agent=claude-code", json=body, timeout=10,
                       headers={"Authorization": f"Bearer {WEB_ROOT_TOKEN}"})
        assert r.status_code == 202, r.text

    def writer_op(self, op: str, payload: dict, *, project: str | None = None) -> dict:
        """Send one writer op over the bus (for what no HTTP route makes, e.g. proposals)."""
        from aimem_common import bus as busmod
        from aimem_common.commands import make_envelope
        from aimem_common.config import BusSettings

        async def go() -> dict:
            bus_settings = BusSettings(nats_url=self.nats_url, token=WEB_ROOT_TOKEN)  # aimem up's NATS wants it
            nc = await busmod.connect(bus_settings, name="web-test", reconnect=False)
            try:
                env = make_envelope(op, payload, workspace="default" if project else None, project=project,
                                    actor="auto_improve")
                return await busmod.Bus(nc, bus_settings).request(env, timeout_s=20)
            finally:
                await nc.close()

        # In a thread of its own: the caller may already run a loop (Playwright's sync API).
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, go()).result()


@pytest.fixture(scope="module")
def web_stack(tmp_path_factory):
    """The whole local stack (``aimem up``, auth on) shared by one test module's web tests.

    Tests of a module share it, so each uses its own users and paths where it changes them.
    """
    from aimem_testing.stack import LocalStack

    root = tmp_path_factory.mktemp("web-stack")
    stack = LocalStack(root / "data", root / "logs", extra_env={"AIMEM_AUTH__TOKEN": WEB_ROOT_TOKEN})
    stack.start(timeout_s=90)
    try:
        yield WebStack(stack.url("query"), stack.url("ingress"), stack.nats_url)
    finally:
        stack.stop()
