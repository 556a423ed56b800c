"""``aimem doctor``: every service's /healthz, NATS, the database and the wiki's git repository."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import typer

from aimem_cli.commands.base import JsonOpt, ServerOpt, TokenOpt, emit, load_settings
from aimem_common import config
from aimem_common.read.dead_letters import count_open


def _failing_checks(r: Any) -> dict[str, Any]:
    """Return the failed checks of a ``/healthz`` answer (``{name: detail}``), {} when unreadable."""
    try:
        checks = r.json().get("checks") or {}
    except ValueError:
        return {}
    return {k: v for k, v in checks.items()
            if v is False or (isinstance(v, dict) and v.get("ok") is False)}


def doctor(
    data_dir: Path = typer.Option(None, "--data-dir"), server: str = ServerOpt, token: str = TokenOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check every service's /healthz, NATS, the database and the wiki's git repo."""
    import httpx

    settings = load_settings(data_dir)
    checks: list[dict[str, Any]] = []

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    from urllib.parse import urlparse

    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    port_base, scheme = settings.port_base, "http"
    given = urlparse(server) if server else None
    if given and given.hostname and given.port:  # `--server http://h:9702`: its siblings are h:9701...
        host, scheme = given.hostname, given.scheme or "http"
        port_base = given.port - config.PORT_OFFSETS["query"]
    for svc in config.SERVICES:
        own = f"{scheme}://{host}:{port_base + config.PORT_OFFSETS[svc]}"
        url = (server.rstrip("/") if (svc == "query" and server) else own) + "/healthz"
        t0 = time.perf_counter()
        try:
            r = httpx.get(url, timeout=2.0)
            detail = f"{url} {r.status_code} in {(time.perf_counter() - t0) * 1000:.0f} ms"
            if r.status_code != 200:
                detail += "".join(f"; {k}: {v}" for k, v in _failing_checks(r).items())
            add(svc, r.status_code == 200, detail)
        except httpx.HTTPError as exc:
            add(svc, False, f"{url}: {type(exc).__name__}")
    for nats_url in settings.bus.nats_urls:  # every member of a cluster
        u = urlparse(nats_url)
        with socket.socket() as s:
            s.settimeout(1.0)
            add("nats", s.connect_ex((u.hostname or "127.0.0.1", u.port or 4222)) == 0, nats_url)
    db = settings.db_path
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            quick = conn.execute("PRAGMA quick_check").fetchone()[0]
            n_dead = count_open(conn)
        finally:
            conn.close()
        add("db", quick == "ok", f"{db} schema v{version}, quick_check {quick}")
        add("dead-letters", n_dead == 0, f"{n_dead} open" + (" (aimem dead-letters list)" if n_dead else ""))
    except sqlite3.Error as exc:
        add("db", False, f"{db}: {exc}")
    try:
        import pygit2

        repo = pygit2.Repository(str(settings.wiki_dir))
        head = "unborn" if repo.head_is_unborn else str(repo.head.target)[:10]
        add("git", True, f"{settings.wiki_dir} HEAD {head}")
    except Exception as exc:  # noqa: BLE001 - any git failure is a failed check
        add("git", False, f"{settings.wiki_dir}: {exc}")
    add(*_spool_check())
    ok = all(c["ok"] for c in checks)
    emit({"ok": ok, "checks": checks}, as_json,
         lambda d: [typer.echo(f"{'ok  ' if c['ok'] else 'FAIL'}  {c['check']:<12} {c['detail']}") for c in d["checks"]])
    if not ok:
        raise typer.Exit(1)




def _spool_check() -> tuple[str, bool, str]:
    """The hook client's spool: failed while it holds events the server refused (401/403)."""
    from aimem_cli.hookconfig import client_settings
    from aimem_cli.hookspool import Spool

    info = Spool(client_settings()[0] / "spool").status()
    stuck = sum(n for r, n in info["by_reason"].items() if r.startswith(("unauthorized", "forbidden")))
    detail = f"{info['pending']} held in {info['path']}"
    if info["pending"]:
        detail += f", oldest {info['oldest_age_s']} s; " + ", ".join(f"{n} {r}" for r, n in info["by_reason"].items())
        detail += " (aimem hook status)"
    return "hook-spool", stuck == 0, detail


def register(app: typer.Typer) -> None:
    """Add ``aimem doctor`` to the ``aimem`` app."""
    app.command("doctor")(doctor)
