"""``aimem export`` and the restore half of ``aimem import --from-export``.

Export layout (a folder, or the same tree inside a ``.zip``)::

    aimem-export.json              {"format": "aimem-export", "v": 1, "workspace", "project",
                                    "exported_at", "page_format", "counts": {part: n}}
    <page path>.md                 each live page: YAML frontmatter (with its title) + body
                                   (``--format markdown``, the default: an Obsidian vault
                                   whose ``[[path.md]]`` wikilinks are paths from its root)
    aimem-data/pages.jsonl         the pages as JSON lines instead (``--format jsonl``)
    aimem-data/sessions.jsonl      one session per line (``aimem_common.read.export`` shapes)
    aimem-data/observations.jsonl  every raw observation, bodies in full
    aimem-data/handoffs.jsonl      the project's handoffs (kept for the record, not restored)

Everything is read through the query service (``GET /api/v1/.../export``, paged), so it
works against a remote server with a read grant. Restore sends the observations through
ingress ``/hook/import`` (the same boundary and keys as transcript imports: a restore
repeated adds nothing) with historical session ends, then writes every page through
``/admin/pages`` (a root token), so the live pages are the exported ones, byte for byte.
Handoffs are not restored: they are one-time notes between live sessions. The whole export
is read and checked first (``read_export``: the manifest, every JSON line, every page path),
so a file that is no export, a malformed line or a page path outside the project is refused
in one line before anything is sent; only a refusal by the server itself (or a lost
connection) can stop a restore part way, and repeating it then adds only what is missing.
"""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any, Iterator
from urllib.parse import quote

import typer

from aimem_common import wikifmt
from aimem_common.read.export import PARTS

MANIFEST = "aimem-export.json"
DATA_DIR = "aimem-data"
RESTORE_BATCH = 400


class _Sink:
    """Write files under a folder or into a zip (streamed, one file at a time)."""

    def __init__(self, dest: Path):
        self.zip = zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) if dest.suffix == ".zip" else None
        self.root = dest
        if self.zip is None:
            dest.mkdir(parents=True, exist_ok=True)

    def open(self, rel: str) -> IO[bytes]:
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or any(p in ("..", ".", "") for p in parts):
            raise ValueError(f"unsafe path in export: {rel!r}")
        if self.zip is not None:
            return self.zip.open(rel, "w")
        path = self.root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "wb")

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def fetch_part(c: Any, workspace: str, project: str, part: str) -> Iterator[dict[str, Any]]:
    """Yield every item of ``part`` from the query service, page by page."""
    after = 0
    while True:
        data = c.get(f"/api/v1/workspaces/{quote(workspace, safe='')}/projects/{quote(project, safe='')}/export",
                     part=part, after=after, limit=1000)
        yield from data["items"]
        if data.get("next") is None:
            return
        after = data["next"]


def page_file(page: dict[str, Any]) -> bytes:
    """A page as its markdown file: frontmatter (title first) + body."""
    fm = {"title": page["title"], **{k: v for k, v in (page.get("frontmatter") or {}).items() if k != "title"}}
    return wikifmt.render(fm, page["body"]).encode("utf-8")


def export_project(c: Any, workspace: str, project: str, dest: Path, fmt: str) -> dict[str, Any]:
    """Write the export of ``workspace/project`` to ``dest``; return the manifest."""
    sink = _Sink(dest)
    counts = {}
    try:
        for part in PARTS:
            n = 0
            if part == "pages" and fmt == "markdown":
                for page in fetch_part(c, workspace, project, part):
                    with sink.open(page["path"]) as fh:
                        fh.write(page_file(page))
                    n += 1
            else:
                with sink.open(f"{DATA_DIR}/{part}.jsonl") as fh:
                    for item in fetch_part(c, workspace, project, part):
                        fh.write(json.dumps(item, ensure_ascii=False).encode("utf-8") + b"\n")
                        n += 1
            counts[part] = n
        manifest = {"format": "aimem-export", "v": 1, "workspace": workspace, "project": project,
                    "exported_at": datetime.now(UTC).isoformat(timespec="seconds"), "page_format": fmt,
                    "counts": counts}
        with sink.open(MANIFEST) as fh:
            fh.write(json.dumps(manifest, indent=2).encode())
    finally:
        sink.close()
    return manifest


# -- restore --------------------------------------------------------------------------------


class ExportError(ValueError):
    """The export cannot be restored as it is (its message names the file and line)."""


class _Source:
    """Read an export folder or zip.

    Raises:
        ExportError: ``src`` is a file that is not a zip archive.
    """

    def __init__(self, src: Path):
        try:
            self.zip = zipfile.ZipFile(src) if src.is_file() else None
        except (zipfile.BadZipFile, OSError) as exc:
            raise ExportError(f"not an aimem export (neither a folder nor a zip archive: {exc})") from exc
        self.root = src
        self._names: list[str] | None = None

    def names(self) -> list[str]:
        if self._names is None:
            if self.zip is not None:
                self._names = [n for n in self.zip.namelist() if not n.endswith("/")]
            else:
                self._names = [str(p.relative_to(self.root).as_posix()) for p in sorted(self.root.rglob("*"))
                               if p.is_file()]
        return self._names

    def read(self, rel: str) -> bytes:
        return self.zip.read(rel) if self.zip is not None else (self.root / rel).read_bytes()

    def lines(self, rel: str) -> Iterator[dict[str, Any]]:
        """Each JSON object line of ``rel`` (nothing when the file is absent).

        Raises:
            ExportError: a line is not a JSON object (its file and line number said).
        """
        if rel not in self.names():
            return
        fh = self.zip.open(rel) if self.zip is not None else open(self.root / rel, "rb")
        with fh:
            for n, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    item = json.loads(raw)
                except ValueError as exc:
                    raise ExportError(f"{rel} line {n} is not JSON ({exc})") from exc
                if not isinstance(item, dict):
                    raise ExportError(f"{rel} line {n} is not a JSON object")
                yield item


# What a restore reads from each line: missing or mistyped, the export is refused before any write.
_REQUIRED = {"sessions": {"session_id": str}, "observations": {"session_id": str, "kind": str, "id": (str, int)},
             "pages": {"path": str, "title": str, "body": str}}


def _check_line(part: str, n: int, item: dict[str, Any]) -> None:
    for key, kind in _REQUIRED[part].items():
        if not isinstance(item.get(key), kind):
            raise ExportError(f"{DATA_DIR}/{part}.jsonl item {n} has no valid {key!r}")


def _check_page(page: dict[str, Any], where: str) -> None:
    from aimem_common.errors import BadRequestError
    from aimem_common.models import validate_page_path

    try:
        validate_page_path(page["path"])
    except BadRequestError as exc:
        raise ExportError(f"{where}: {exc}") from exc
    if not isinstance(page.get("frontmatter") or {}, dict):
        raise ExportError(f"{where}: frontmatter of {page['path']!r} is not a mapping")


def read_export(source: "_Source") -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]], int]:
    """Read and check a whole export before anything of it is sent.

    Every line of ``sessions.jsonl`` and ``observations.jsonl`` must be a JSON object with the
    fields a restore uses, and every page must parse and have a path the server accepts
    (``models.validate_page_path``: no absolute path, no ``..``). Observations are only counted
    here and read again while sending, so a large export is not held in memory.

    Returns ``(manifest, sessions by id, pages, observation count)``.

    Raises:
        ExportError: the first problem found (file and line named).
    """
    try:
        manifest = json.loads(source.read(MANIFEST))
    except (KeyError, OSError, ValueError) as exc:
        raise ExportError(f"not an aimem export (no readable {MANIFEST})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != "aimem-export":
        raise ExportError(f"not an aimem export ({MANIFEST} is not an aimem-export manifest)")
    sessions = {}
    for n, s in enumerate(source.lines(f"{DATA_DIR}/sessions.jsonl"), 1):
        _check_line("sessions", n, s)
        sessions[s["session_id"]] = s
    observations = 0
    for n, obs in enumerate(source.lines(f"{DATA_DIR}/observations.jsonl"), 1):
        _check_line("observations", n, obs)
        observations += 1
    if manifest.get("page_format") == "jsonl":
        pages = []
        for n, page in enumerate(source.lines(f"{DATA_DIR}/pages.jsonl"), 1):
            _check_line("pages", n, page)
            _check_page(page, f"{DATA_DIR}/pages.jsonl item {n}")
            pages.append(page)
    else:
        pages = _vault_pages(source)
    return manifest, sessions, pages, observations


def _tool_parts(body: str) -> tuple[Any, str | None]:
    """Split a stored tool body (``tool: X\\ninput: ...\\noutput: ...``) into input and output."""
    rest = body.split("\n", 1)[1] if body.startswith("tool: ") and "\n" in body else body
    inp, _, out = rest.partition("\noutput: ")
    inp = inp[len("input: "):] if inp.startswith("input: ") else None
    try:
        inp = json.loads(inp) if inp and inp.lstrip().startswith("{") else inp
    except ValueError:
        pass
    return inp, (out if _ else None)


def observation_event(obs: dict[str, Any]) -> dict[str, Any]:
    """An exported observation as an ``/hook/import`` item (its text fields by kind)."""
    kind, body = obs["kind"], obs.get("body") or ""
    payload: dict[str, Any] = {"hook_event_name": kind, "session_id": obs["session_id"], "cwd": obs.get("cwd"),
                               "timestamp": obs.get("occurred_at")}
    if kind in ("pre-tool-use", "post-tool-use"):
        inp, out = _tool_parts(body)
        payload.update(tool_name=obs.get("tool_name"), tool_input=inp, tool_response=out)
    elif kind in ("user-prompt", "session-start"):
        payload["prompt"] = body
    elif kind in ("pre-compact", "post-compaction"):
        payload["summary"] = body
    else:
        payload["message"] = body
    return {"key": f"restore:{obs['session_id']}:{obs['id']}"[:200],
            "payload": {k: v for k, v in payload.items() if v is not None}}


def restore_export(src: Path, *, server: str, token: str | None, query_server: str | None = None,
                   workspace: str | None = None, project: str | None = None,
                   dry_run: bool = False) -> dict[str, Any]:
    """Restore an export into the server: observations (→ sessions, pages), then the pages.

    Returns ``{"workspace", "project", "pages", "sessions", "observations"}``.

    Raises:
        typer.Exit: not an export, or the server refused (one-line message on stderr).
    """
    from aimem_cli.commands.base import client, fail
    from aimem_cli.commands.importsend import ingress_sender

    if not src.exists():
        fail(f"{src} does not exist")
    try:  # the whole export is checked before the first write: a bad one stores nothing
        source = _Source(src)
        manifest, sessions, pages, _count = read_export(source)
    except ExportError as exc:
        fail(f"{src}: {exc}")
    except (zipfile.BadZipFile, OSError) as exc:  # a damaged zip member, an unreadable file
        fail(f"{src}: cannot read the export ({exc})")
    ws, pj = workspace or manifest["workspace"], project or manifest["project"]
    agents = {sid: s.get("agent") or "generic" for sid, s in sessions.items()}
    result = {"workspace": ws, "project": pj, "pages": 0, "sessions": len(sessions), "observations": 0}
    send = None if dry_run else ingress_sender(server, token)
    batch: list[dict[str, Any]] = []
    current_agent: str | None = None
    last_ts: dict[str, Any] = {}

    def flush(agent: str | None) -> None:
        if batch and send is not None:
            send(json.dumps({"agent": agent or "generic", "workspace": ws, "project": pj,
                             "events": batch}).encode())
        batch.clear()

    for obs in source.lines(f"{DATA_DIR}/observations.jsonl"):
        agent = agents.get(obs["session_id"], obs.get("agent") or "generic")
        if agent != current_agent or len(batch) >= RESTORE_BATCH:
            flush(current_agent)
            current_agent = agent
        batch.append(observation_event(obs))
        last_ts[obs["session_id"]] = obs.get("occurred_at")
        result["observations"] += 1
    flush(current_agent)
    for sid, s in sessions.items():  # historical ends: pages and counts, no handoffs
        if s.get("ended_at") and sid in last_ts:
            batch.append({"key": f"restore:{sid}:end", "end": True,
                          "payload": {"session_id": sid, "cwd": s.get("cwd"), "timestamp": s["ended_at"]}})
            flush(agents.get(sid))
    if not dry_run:
        with client(query_server, token) as c:
            for page in pages:
                c.post("/admin/pages", {"workspace": ws, "project": pj, "path": page["path"], "title": page["title"],
                                        "body": page["body"], "frontmatter": page.get("frontmatter") or {}})
                result["pages"] += 1
    else:
        result["pages"] = len(pages)
    return result


def _vault_pages(source: _Source) -> list[dict[str, Any]]:
    out = []
    for name in source.names():
        if not name.endswith(".md") or name.startswith(f"{DATA_DIR}/"):
            continue
        try:
            parsed = wikifmt.parse(source.read(name).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ExportError(f"{name} is not a readable page ({exc})") from exc
        fm = dict(parsed.frontmatter)
        title = fm.pop("title", None) or PurePosixPath(name).stem
        page = {"path": name, "title": str(title), "body": parsed.body, "frontmatter": fm}
        _check_page(page, name)
        out.append(page)
    return out


def register(app: typer.Typer) -> None:
    """Add ``export`` to the CLI."""
    from aimem_cli.commands.base import ServerOpt, TokenOpt, WsOpt, client, emit, fail

    @app.command("export")
    def export_cmd(
        project: str = typer.Option(..., "--project", help="The project to export."),
        workspace: str = WsOpt,
        to: Path = typer.Option(None, "--to", help="A folder, or a FILE.zip (default: ./<project>-export)."),
        fmt: str = typer.Option("markdown", "--format", help="markdown (an Obsidian vault) or jsonl."),
        server: str = ServerOpt, token: str = TokenOpt,
        as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
    ) -> None:
        """Export a project's live pages (markdown or JSONL) with its sessions, observations and handoffs."""
        if fmt not in ("markdown", "jsonl"):
            fail(f"--format {fmt!r}: use markdown or jsonl")
        dest = to or Path(f"{project}-export")
        if dest.suffix != ".zip" and dest.exists() and any(dest.iterdir()):
            fail(f"{dest} is not empty; choose a new folder or a .zip")
        ws = workspace or "default"
        with client(server, token) as c:
            manifest = export_project(c, ws, project, dest, fmt)
        emit(manifest, as_json, lambda m: typer.echo(
            f"exported {ws}/{project} to {dest}: " + ", ".join(f"{n} {k}" for k, n in m["counts"].items())))
