"""Backup archives: create one from a live data dir, validate and extract one for restore.

Layout of a backup (a gzipped tarball)::

    aimem-backup.json     manifest: format, created_at, schema_version, counts
    db/memory.sqlite      a consistent snapshot (SQLite online backup API, journal=DELETE)
    wiki/...              the wiki tree including wiki/.git
    raw/workstreams/<id>/<first>-<last>.jsonl
                          the managed workstreams' ledger segments (``aimem run``)
    config.toml           when the data dir has one

``create_backup`` only *reads* the data dir (a ``mode=ro`` connection is the backup
source), so the writer stays live and keeps accepting writes while it runs. ``extract_archive``
refuses any entry outside that layout before anything is written.

The ledger segments are copied after the DB snapshot: every segment a snapshot row names
was written before its command committed, so it is on disk when the copy starts. A segment
appended after the snapshot is copied too, and a segment a purge removed meanwhile is
missing; ``reconcile_segments`` (run by a restore on the extracted copy) makes the folder
match the restored rows again: it removes segments no row names and writes back, from the
rows, any segment a row names that is missing (the rows hold the same sanitised text).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import tarfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from aimem_common.db.connect import open_reader
from aimem_common.errors import BadRequestError
from aimem_common.workstreams import SEGMENT_FIELDS, SEGMENTS_DIR, segment_text

FORMAT_VERSION = 1
MANIFEST_NAME = "aimem-backup.json"
DB_MEMBER = "db/memory.sqlite"
_TOP_LEVEL = {"db", "wiki", "raw", "config.toml", MANIFEST_NAME}
_RAW_PARTS = tuple(PurePosixPath(SEGMENTS_DIR).parts)  # the only folder of raw/ a backup carries
_SEGMENT_NAME = re.compile(r"^\d{10}-\d{10}\.jsonl$")
_WORKSTREAM_ID = re.compile(r"^[0-9a-f]{32}$")
_SKIP_SUFFIXES = (".lock",)  # git lock files of an in-flight commit: never restore them
MAX_MEMBERS = 2_000_000


def snapshot_db(db_path: Path, dest: Path) -> dict[str, Any]:
    """Copy the live DB to ``dest`` with the online backup API; return row counts.

    Runs on the caller's thread (blocking). The source is a read-only connection, so the
    writer keeps committing meanwhile; the copy is one consistent snapshot.
    """
    src = open_reader(db_path, wait_s=5)
    try:
        dst = sqlite3.connect(dest)
        try:
            src.backup(dst, pages=4096)
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            counts = {
                "schema_version": dst.execute("PRAGMA user_version").fetchone()[0],
                "pages_latest": dst.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0],
                "sessions": dst.execute("SELECT count(*) FROM sessions").fetchone()[0],
                "observations": dst.execute("SELECT count(*) FROM observations").fetchone()[0],
                "workstream_events": _count(dst, "workstream_events"),
            }
        finally:
            dst.close()
    finally:
        src.close()
    return counts


def _count(conn: sqlite3.Connection, table: str) -> int:
    """Rows of ``table``, 0 when the snapshot's schema predates it."""
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _segment_files(data_dir: Path) -> list[Path]:
    """The ledger segments under ``<data_dir>/raw/workstreams/<id>/`` (regular files only,
    names as the writer writes them; temporary files of an append in flight are left out)."""
    root = data_dir / SEGMENTS_DIR
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        if not _WORKSTREAM_ID.match(folder.name) or folder.is_symlink() or not folder.is_dir():
            continue
        out += [p for p in sorted(folder.iterdir())
                if _SEGMENT_NAME.match(p.name) and not p.is_symlink() and p.is_file()]
    return out


def _wiki_files(wiki: Path) -> list[Path]:
    """List the wiki's files in a copy-safe order: git refs before objects before the tree.

    Git writes an object before the ref that points at it, so copying refs first means
    every copied ref names an object that is already on disk when objects are copied.
    """
    if not wiki.is_dir():
        return []
    git = wiki / ".git"
    first: list[Path] = []
    for name in ("HEAD", "packed-refs", "refs"):
        p = git / name
        if p.is_file():
            first.append(p)
        elif p.is_dir():
            first.extend(sorted(x for x in p.rglob("*") if x.is_file()))
    seen = set(first)
    rest = []
    for root, dirs, files in os.walk(wiki):
        dirs.sort()
        for f in sorted(files):
            p = Path(root) / f
            if p in seen or p.is_symlink() or f.endswith(_SKIP_SUFFIXES) or f.startswith(".aimem-tmp"):
                continue
            rest.append(p)
    return first + rest


def create_backup(data_dir: Path, db_path: Path, out_path: Path, work_dir: Path) -> dict[str, Any]:
    """Write a gzipped backup tarball of ``data_dir`` to ``out_path``; return the manifest.

    Args:
        data_dir: the live data dir (its ``wiki/`` and ``config.toml`` are read).
        db_path: the live SQLite file (snapshotted with the online backup API).
        out_path: where the ``.tar.gz`` goes (created/overwritten).
        work_dir: scratch dir for the DB snapshot (removed file afterwards).

    Blocking; run it off the event loop. Files that vanish mid-copy (a page deleted by the
    writer) are skipped.
    """
    snap = work_dir / "memory.sqlite"
    counts = snapshot_db(db_path, snap)
    manifest = {
        "format": FORMAT_VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        **counts,
    }
    mbytes = json.dumps(manifest, indent=2).encode()
    try:
        with tarfile.open(out_path, "w:gz", compresslevel=6) as tar:
            info = tarfile.TarInfo(MANIFEST_NAME)
            info.size = len(mbytes)
            info.mtime = int(datetime.now(UTC).timestamp())
            tar.addfile(info, io.BytesIO(mbytes))
            tar.add(snap, arcname=DB_MEMBER)
            config = data_dir / "config.toml"
            if config.is_file():
                tar.add(config, arcname="config.toml")
            wiki = data_dir / "wiki"
            for p in _wiki_files(wiki):
                arc = "wiki/" + p.relative_to(wiki).as_posix()
                try:
                    tar.add(p, arcname=arc, recursive=False)
                except FileNotFoundError:
                    continue
            for p in _segment_files(data_dir):  # after the snapshot: see the module docstring
                try:
                    tar.add(p, arcname=p.relative_to(data_dir).as_posix(), recursive=False)
                except FileNotFoundError:
                    continue  # purged meanwhile: reconcile_segments writes it back from the rows
    finally:
        snap.unlink(missing_ok=True)
    return manifest


def _check_member(m: tarfile.TarInfo) -> None:
    name = m.name
    p = PurePosixPath(name)
    if not name or p.is_absolute() or name.startswith("/") or "\\" in name:
        raise BadRequestError(f"archive entry {name!r} is an absolute or odd path", code="bad_archive")
    if any(part in ("..", "") for part in p.parts) or "\x00" in name:
        raise BadRequestError(f"archive entry {name!r} escapes the data dir", code="bad_archive")
    if p.parts[0] not in _TOP_LEVEL:
        raise BadRequestError(f"archive entry {name!r} is outside the backup layout", code="bad_archive")
    if p.parts[0] == "raw" and p.parts[1:len(_RAW_PARTS)] != _RAW_PARTS[1:len(p.parts)]:
        raise BadRequestError(f"archive entry {name!r} is outside the backup layout", code="bad_archive")
    if not (m.isfile() or m.isdir()):
        raise BadRequestError(f"archive entry {name!r} is not a regular file or directory", code="bad_archive")


def extract_archive(archive: Path, dest: Path) -> dict[str, Any]:
    """Validate every entry of ``archive`` and extract it under ``dest``; return the manifest.

    Raises:
        BadRequestError: ``bad_archive`` — unreadable/truncated/corrupt tarball, an entry
            outside the layout (absolute, ``..``, a link or device), no DB snapshot, or a
            manifest of an unknown format.
    """
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = []
            for m in tar:
                _check_member(m)
                members.append(m)
                if len(members) > MAX_MEMBERS:
                    raise BadRequestError("archive has too many entries", code="bad_archive")
            names = {m.name for m in members}
            if DB_MEMBER not in names:
                raise BadRequestError(f"archive has no {DB_MEMBER}", code="bad_archive")
            tar.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"cannot read archive {archive}: {exc}", code="bad_archive") from exc
    manifest: dict[str, Any] = {}
    mpath = dest / MANIFEST_NAME
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text())
        except ValueError as exc:
            raise BadRequestError(f"archive manifest is not JSON: {exc}", code="bad_archive") from exc
        if manifest.get("format") != FORMAT_VERSION:
            raise BadRequestError(f"unknown backup format {manifest.get('format')!r}", code="bad_archive")
    return manifest


def reconcile_segments(data_dir: Path, conn: sqlite3.Connection) -> dict[str, int]:
    """Make ``<data_dir>/raw/workstreams/`` match the ledger rows of ``conn`` (a restore, on the
    extracted copy before it is swapped in; see the module docstring).

    Removes every file under it that no ``workstream_events`` row names (a segment appended
    after the snapshot, one of a rolled-back command, anything else) and folders left empty;
    writes back each segment a row names that is missing, from the rows. Returns ``{"kept",
    "removed", "rewritten"}`` (files). A database without the ledger tables keeps nothing.
    """
    root = data_dir / SEGMENTS_DIR
    try:
        named = {(w, seg) for w, seg in conn.execute("SELECT DISTINCT workstream_id, segment FROM workstream_events")}
    except sqlite3.OperationalError:
        named = set()
    out = {"kept": 0, "removed": 0, "rewritten": 0}
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            files = sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else [folder]
            for p in files:
                if p.parent == folder and (folder.name, p.name) in named and p.is_file() and not p.is_symlink():
                    out["kept"] += 1
                    continue
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                out["removed"] += 1
            if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                folder.rmdir()
    root.mkdir(parents=True, exist_ok=True)  # swapped in even when empty: no stale segments stay behind
    cols = ", ".join(SEGMENT_FIELDS)
    for wid, seg in sorted(named):
        if not (_WORKSTREAM_ID.match(wid) and _SEGMENT_NAME.match(seg)):
            continue  # not a name the writer gives: never a path to write to
        path = root / wid / seg
        if path.is_file():
            continue
        rows = [dict(zip(SEGMENT_FIELDS, r)) for r in conn.execute(
            f"SELECT {cols} FROM workstream_events WHERE workstream_id = ? AND segment = ? ORDER BY seq", (wid, seg))]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{seg}.tmp")
        tmp.write_text(segment_text(wid, rows), encoding="utf-8", errors="surrogatepass")
        os.replace(tmp, path)
        out["rewritten"] += 1
    return out
