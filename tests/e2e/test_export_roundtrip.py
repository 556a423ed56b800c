"""``aimem export`` → ``aimem import --from-export`` into a fresh stack: same pages, same hits.

Stack A gets imported transcripts (session pages) and hand-written pages with wikilinks;
its export opens as an Obsidian vault whose ``[[...]]`` links all resolve to files; a fresh
stack B restored from it serves the same live pages and ``memory_query`` (official MCP
client) returns the same top hits for a set of questions.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from aimem_testing.stack import LocalStack
from aimem_testing.transcripts import make_corpus
from aimem_testing.probe import wait_for as probe_wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
QUERIES = ["retry policy with backoff", "cache invalidation", "invoice pagination cursor",
           "deploy helm", "which tests failed", "queue worker"]
PAGES = {
    "concepts/retry.md": "# Retry policy\n\nRetries use exponential backoff with jitter; see "
                         "[[decisions/0001-backoff.md]] and [[concepts/cache|the cache]].\n",
    "concepts/cache.md": "# Cache\n\nCache invalidation happens on write; retries ([[concepts/retry.md]]) "
                         "never bypass it.\n",
    "decisions/0001-backoff.md": "# Decision: backoff\n\nWe chose capped exponential backoff for the queue "
                                 "worker.\n\nBack to [[concepts/retry.md|retry]].\n",
}


def cli(env: dict[str, str], *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """Run ``aimem ARGS``; its exit status must be one of ``ok``."""
    proc = subprocess.run([str(Path(sys.executable).with_name("aimem")), *args], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode in ok, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def env_for(stack: LocalStack, client: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client), AIMEM_INGRESS_URL=stack.url("ingress"),
               AIMEM_SERVER_URL=stack.url("query"), AIMEM_AUTH__TOKEN=stack.token)
    return env


def live_pages(stack: LocalStack) -> dict[str, tuple[str, str]]:
    items, after = [], 0
    while True:
        r = httpx.get(stack.url("query") + "/api/v1/workspaces/default/projects/acme-api/export",
                      params={"part": "pages", "after": after}, timeout=30, headers=stack.headers)
        if r.status_code == 404:
            return {}
        data = r.json()
        items += data["items"]
        if data["next"] is None:
            return {p["path"]: (p["title"], p["body"]) for p in items}
        after = data["next"]


def wait_for(fn, timeout_s: float = 120.0, what: str = "condition"):
    """``aimem_testing.probe.wait_for`` polling every 0.2 s, with this module's 120 s default."""
    return probe_wait_for(fn, timeout_s, what, poll_s=0.2)


def wait_applied(stack: LocalStack, timeout_s: float = 120.0) -> None:
    """Wait until the writer has applied every published command of both lanes: live
    (``writer_lag``) and imported (``import_lag``, the ``AIMEM_BULK`` lane, taken only when the
    live one has nothing pending). ``aimem import`` returns once ingress has the events, not
    once they are applied, and a restore's pages (``/admin/pages``, live lane) land before its
    observations and session ends (bulk lane): equal pages do not mean equal search data."""
    def applied() -> bool:
        st = httpx.get(stack.url("query") + "/api/v1/status", timeout=30, headers=stack.headers).json()
        return st.get("writer_lag") == 0 and st.get("import_lag") == 0
    wait_for(applied, timeout_s, what="the writer to apply both lanes (writer_lag and import_lag 0)")


async def top_hits(mcp_url: str, headers: dict[str, str]) -> dict[str, list[str]]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    out = {}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(mcp_url, http_client=http)) as client:
        for q in QUERIES:
            res = await client.call_tool("memory_query", {"query": q, "workspace": "default",
                                                          "project": "acme-api", "limit": 5})
            structured = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)
            if isinstance(structured, dict) and set(structured) == {"result"}:
                structured = structured["result"]
            data = structured if structured is not None else json.loads("".join(
                getattr(b, "text", "") for b in res.content))
            out[q] = [h["path"] for h in data["hits"]]
    return out


@pytest.mark.timeout(600)
def test_export_then_restore_into_a_fresh_stack_round_trips(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", claude=10, codex=8, special_every=100)
    with LocalStack(tmp_path / "a", tmp_path / "a-logs") as a:
        env_a = env_for(a, tmp_path / "client-a")
        # the generated corpus holds malformed lines on purpose: the import says so with exit 2
        cli(env_a, "import", "--home", str(corpus.home), "--project", "acme-api", ok=(2,))
        for path, body in PAGES.items():
            subprocess.run([str(Path(sys.executable).with_name("aimem")), "write-page", path, "--project",
                            "acme-api"], input=body, text=True, env=env_a, check=True, capture_output=True)
        sessions = sum(1 for s, p in corpus.projects.items() if p == "acme-api")
        wait_applied(a)
        pages_a = wait_for(lambda: (p := live_pages(a)) and len(p) >= len(PAGES) + sessions and p,
                           what="stack A's pages")
        hits_a = asyncio.run(top_hits(a.url("mcp-gateway") + "/mcp", a.headers))
        vault, zipped = tmp_path / "vault", tmp_path / "acme.zip"
        manifest = json.loads(cli(env_a, "export", "--project", "acme-api", "--to", str(vault), "--json").stdout)
        cli(env_a, "export", "--project", "acme-api", "--to", str(zipped), "--format", "jsonl")
    assert manifest["counts"]["pages"] == len(pages_a) and manifest["counts"]["sessions"] == sessions

    # The vault: every page a file, every wikilink resolves to one (Obsidian: path from the root).
    files = {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")}
    assert files == set(pages_a)
    links = 0
    for f in files:
        for target in re.findall(r"\[\[([^\]|#]+)(?:\|[^\]]*)?\]\]", (vault / f).read_text()):
            links += 1
            assert target in files or f"{target}.md" in files, f"{f}: [[{target}]] does not resolve"
    assert links >= 4
    assert (vault / "aimem-data" / "observations.jsonl").read_text().count("\n") == \
        manifest["counts"]["observations"] > 0
    assert "aimem-data/pages.jsonl" in zipfile.ZipFile(zipped).namelist()

    for src in (vault, zipped):
        with LocalStack(tmp_path / f"b-{src.suffix or 'dir'}", tmp_path / f"b-logs-{src.suffix}") as b:
            env_b = env_for(b, tmp_path / f"client-b{src.suffix}")
            out = json.loads(cli(env_b, "import", "--from-export", str(src), "--json").stdout)
            assert out["pages"] == len(pages_a) and out["observations"] == manifest["counts"]["observations"]
            wait_applied(b)  # the pages come first (live lane); the observations the search ranks by, after
            pages_b = wait_for(lambda: (p := live_pages(b)) == pages_a and p, what="the same pages in stack B")
            assert pages_b == pages_a
            hits_b = asyncio.run(top_hits(b.url("mcp-gateway") + "/mcp", b.headers))
            assert hits_b == hits_a and any(hits_a.values())
            assert httpx.get(b.url("query") + "/api/v1/workspaces/default/projects/acme-api/handoffs",
                             timeout=30, headers=b.headers).json() in ([], {"handoffs": []})
