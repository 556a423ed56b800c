"""Screenshots of the web's pictures for ``docs/`` (the README shows them).

Run ``make screenshots`` (``python -m aimem_testing.screenshots --out docs``). It starts the
whole local stack (``aimem up`` on free ports, data in a temporary folder, auth on, the
query service sampling metrics every second), seeds it through the public interfaces only
(hooks to ingress with their own timestamps, page writes through ``/admin/pages``, handoffs
over the bus as the MCP gateway sends them), logs a user in with Playwright driving Debian's
Chromium and saves one PNG per picture:

* ``pictures-activity.png``: sessions and observations per day by agent, three weeks;
* ``pictures-timeline.png``: one session's strip (prompts, tools, failures, compactions);
* ``pictures-chains.png``: handoff chains (claimed, open);
* ``pictures-graph-page.png``: the link graph one hop around a page;
* ``pictures-graph-project.png``: the project's 150 most connected pages;
* ``pictures-graph-300.png``: two hops around the most linked page (up to 300 pages);
* ``pictures-status.png``: the Status sparklines (hooks, writer lag, apply rate, …).

The seeded text is made up and fixed (one random seed), so a rerun draws the same pictures
apart from dates. Each PNG is reduced to an adaptive palette (Pillow) and must stay under
``MAX_BYTES``; the script fails otherwise. Nothing is left running: the stack and the
browser stop in ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

MAX_BYTES = 200_000
TOKEN = "screenshots-root-token"
USER = ("ann", "correct horse battery staple")
PROJECT = "acme-api"
VIEWPORT = {"width": 1100, "height": 800}

TOPICS = ["retry policy", "idempotency key", "backoff", "rate limit", "auth token", "schema migration",
          "cache warming", "job queue", "dead letters", "webhook signing", "pagination", "feature flags",
          "config loading", "health checks", "log format", "metrics names", "test fixtures", "release steps",
          "database pool", "timeouts", "error codes", "tracing", "secrets rotation", "CSV export",
          "search index", "image resize", "email sender", "session cookies", "CORS rules", "deploy script"]
FOLDERS = ["concepts", "decisions", "gotchas", "procedures", "notes"]
# each agent's own hook event names (ingress maps them to the same kinds)
EVENTS = {
    "claude-code": {"start": "SessionStart", "prompt": "UserPromptSubmit", "pre": "PreToolUse",
                    "post": "PostToolUse", "fail": "PostToolUseFailure", "compact": "PreCompact"},
    "codex": {"start": "SessionStart", "prompt": "UserPromptSubmit", "pre": "PreToolUse", "post": "PostToolUse",
              "fail": "PostToolUse", "compact": "PreCompact"},
    "gemini": {"start": "SessionStart", "prompt": "BeforeAgent", "pre": "BeforeTool", "post": "AfterTool",
               "fail": "AfterTool", "compact": "PreCompress"},
}


class Seed:
    """Write the made-up project into a running stack (``query``/``ingress`` base URLs)."""

    def __init__(self, query: str, ingress: str, nats_url: str) -> None:
        self.query, self.ingress, self.nats_url = query, ingress, nats_url
        self.auth = {"Authorization": f"Bearer {TOKEN}"}
        self.rng = random.Random(7)

    def admin(self, method: str, path: str, body: dict) -> dict:
        r = httpx.request(method, self.query + path, json=body, headers=self.auth, timeout=30)
        r.raise_for_status()
        return r.json() if r.content else {}

    def user(self) -> None:
        self.admin("POST", "/admin/users", {"name": USER[0]})
        self.admin("PUT", f"/admin/users/{USER[0]}/password", {"password": USER[1]})
        self.admin("PUT", "/admin/grants", {"user": USER[0], "workspace": "default", "project": PROJECT,
                                            "can_write": True})

    def pages(self, n: int) -> list[str]:
        """``n`` pages linking to 1–4 others, chosen in proportion to the links they already have
        (a few hubs, many leaves, as a wiki grows); return their paths."""
        paths, weights = [], []
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            folder = FOLDERS[(i // len(TOPICS)) % len(FOLDERS)]
            path = f"{folder}/{topic.replace(' ', '-')}{'' if i < len(TOPICS) * len(FOLDERS) else f'-{i}'}.md"
            links = set()
            for _ in range(self.rng.randint(1, 4) if paths else 0):
                links.add(self.rng.choices(paths, weights=weights)[0])
            body = (f"# {folder[:-1].capitalize()}: {topic}\n\nWhat we know about {topic}. See "
                    + ", ".join(f"[[{p[:-3]}]]" for p in sorted(links)) + ".\n")
            self.admin("POST", "/admin/pages", {"project": PROJECT, "path": path, "body": body,
                                                "frontmatter": {"entities": [topic]}})
            for p in links:
                weights[paths.index(p)] += 1
            paths.append(path)
            weights.append(1)
        return paths

    def hook(self, agent: str, body: dict) -> None:
        body = {"cwd": f"/home/dev/{PROJECT}", "workspace": "default", "project": PROJECT, **body}
        r = httpx.post(f"{self.ingress}/hook?agent={agent}", json=body, headers=self.auth, timeout=10)
        if r.status_code != 202:
            raise RuntimeError(f"hook refused: {r.status_code} {r.text}")

    def sessions(self, days: int) -> str:
        """Sessions of three agents over ``days`` days (each with its own timestamps); return
        the id of one with a failure and a compaction (the strip's screenshot)."""
        now = datetime.now(UTC)
        shown = ""
        for n in range(days * 2):
            if self.rng.random() < 0.3:
                continue
            agent = ("claude-code", "codex", "gemini")[n % 3 if self.rng.random() < 0.8 else 0]
            ev = EVENTS[agent]
            sid = f"{agent.split('-')[0]}-{n:03d}"
            at = now - timedelta(days=days - 1 - n / 2, hours=self.rng.uniform(0, 10))
            steps = [("start", {"source": "startup"})]
            for k in range(self.rng.randint(3, 14)):
                topic = self.rng.choice(TOPICS)
                roll = self.rng.random()
                if k % 5 == 0:
                    steps.append(("prompt", {"prompt": f"look at the {topic} code"}))
                elif roll < 0.12 and agent == "claude-code":
                    steps.append(("fail", {"tool_name": "Bash", "tool_input": {"command": "pytest -q"},
                                           "error": "Exit code 1\n1 failed"}))
                elif roll < 0.18:
                    steps.append(("compact", {"trigger": "auto"}))
                else:
                    cmd = {"command": f"grep -rn '{topic}' src"}
                    steps.append(("pre", {"tool_name": "Bash", "tool_input": cmd}))
                    steps.append(("post", {"tool_name": "Bash", "tool_input": cmd, "tool_response": {"ok": True}}))
            if agent == "claude-code" and not shown and len(steps) > 8:
                steps[4:4] = [("fail", {"tool_name": "Bash", "tool_input": {"command": "pytest -q"},
                                        "error": "Exit code 1\n1 failed"}), ("compact", {"trigger": "auto"})]
                shown = sid
            for k, (what, fields) in enumerate(steps):
                stamp = (at + timedelta(minutes=3 * k)).isoformat()
                self.hook(agent, {"session_id": sid, "hook_event_name": ev[what], "timestamp": stamp, **fields})
        return shown

    def writer_op(self, op: str, payload: dict) -> dict:
        """One writer command over the bus (handoffs: what the MCP gateway sends)."""
        from aimem_common import bus as busmod
        from aimem_common.commands import make_envelope
        from aimem_common.config import BusSettings

        async def go() -> dict:
            settings = BusSettings(nats_url=self.nats_url, token=TOKEN)
            nc = await busmod.connect(settings, name="screenshots", reconnect=False)
            try:
                env = make_envelope(op, payload, workspace="default", project=PROJECT, actor="screenshots")
                reply = await busmod.Bus(nc, settings).request(env, timeout_s=20)
            finally:
                await nc.close()
            if not reply.get("ok", True):
                raise RuntimeError(f"{op}: {reply}")
            return reply.get("result", reply)

        with ThreadPoolExecutor(1) as pool:  # a loop of its own, beside Playwright's
            return pool.submit(asyncio.run, go()).result()

    def chains(self) -> None:
        """Two chains of handoffs between agents: each claimed by the next agent, the last one open."""
        agents = ["claude-code", "codex", "gemini", "claude-code"]
        for chain, titles in enumerate((["Wire the retry policy", "Finish the backoff tests", "Ship the release"],
                                        ["Rotate the auth token", "Document the rotation"])):
            for i, title in enumerate(titles):
                sid = f"h{chain}-{i}"
                h = self.writer_op("handoff.begin", {"title": title, "body": f"{title}: next steps.", "shared": True,
                                                     "session_id": sid, "from_agent": agents[i]})["handoff"]
                if i < len(titles) - 1:
                    self.writer_op("handoff.accept", {"handoff_id": h["id"], "agent": agents[i + 1],
                                                      "session_id": f"h{chain}-{i + 1}"})


def shoot(page, path: Path) -> int:
    """Save a full-page screenshot of ``page`` at ``path`` with an adaptive palette; return its size."""
    from PIL import Image

    img = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
    img.quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise RuntimeError(f"{path.name} is {size} bytes (limit {MAX_BYTES})")
    return size


def take(out: Path, pages: int) -> dict[str, int]:
    """Start a stack, seed it, save the screenshots into ``out``; return ``{file: bytes}``."""
    from playwright.sync_api import sync_playwright

    from aimem_testing.browser import ARGS, CHROMIUM
    from aimem_testing.stack import LocalStack

    out.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="aimem-screenshots-") as tmp:
        stack = LocalStack(Path(tmp) / "data", Path(tmp) / "logs",
                           extra_env={"AIMEM_AUTH__TOKEN": TOKEN, "AIMEM_QUERY__HEALTH_SAMPLE_S": "1"})
        stack.start(timeout_s=120)
        try:
            seed = Seed(stack.url("query"), stack.url("ingress"), stack.nats_url)
            t0 = time.monotonic()
            seed.user()
            paths = seed.pages(pages)
            sid = seed.sessions(days=21)
            seed.chains()
            print(f"seeded {len(paths)} pages, sessions and handoffs in {time.monotonic() - t0:.0f} s")
            base, proj = stack.url("query"), f"/web/p/default/{PROJECT}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                try:
                    page = browser.new_context(viewport=VIEWPORT).new_page()
                    page.goto(f"{base}/web/login")
                    page.fill("#name", USER[0])
                    page.fill("#password", USER[1])
                    page.locator("form[aria-labelledby=pw-h] button").click()
                    page.wait_for_url(re.compile(r".*/web/projects$"))
                    hub = _wait_for(page, base, proj, paths, sid)
                    for name, url in [("pictures-activity.png", f"{proj}/activity?days=21"),
                                      ("pictures-timeline.png", f"{proj}/sessions/{sid}"),
                                      ("pictures-chains.png", f"{proj}/handoffs/chains"),
                                      ("pictures-graph-page.png", f"{proj}/graph/{paths[len(paths) // 3]}"),
                                      ("pictures-graph-project.png", f"{proj}/graph"),
                                      ("pictures-graph-300.png", f"{proj}/graph/{hub}?hops=2"),
                                      ("pictures-status.png", "/web/status")]:
                        page.goto(base + url)
                        sizes[name] = shoot(page, out / name)
                        print(f"{name}: {sizes[name] / 1024:.0f} KiB")
                finally:
                    browser.close()
        finally:
            stack.stop()
    return sizes


def _wait_for(page, base: str, proj: str, paths: list[str], sid: str) -> str:
    """Wait until the writer applied the seed (the strip's session, the last page); return the
    most linked page's path (the project graph's first row)."""
    for _ in range(240):
        page.goto(f"{base}{proj}/graph")
        strip = page.goto(f"{base}{proj}/sessions/{sid}")
        if strip.status == 200 and page.locator("svg.strip a.mark").count() > 8:
            page.goto(f"{base}{proj}/graph")
            if page.locator("svg.graph a.node").count() >= min(150, len(paths) // 2):
                return page.locator("svg.graph a.node").first.get_attribute("data-path")
        page.wait_for_timeout(500)
    raise RuntimeError("the seeded stack did not show the pictures in time")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNGs (default: docs)")
    ap.add_argument("--pages", type=int, default=420, help="pages of the seeded project")
    args = ap.parse_args(argv)
    try:
        take(args.out, args.pages)
    except Exception as exc:  # noqa: BLE001 - one line for a script
        print(f"screenshots: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
