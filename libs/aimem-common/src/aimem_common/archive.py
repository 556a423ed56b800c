"""Backup archives: create one from a live data dir, validate and extract one for restore.

Layout of a backup (a gzipped tarball)::

    aimem-backup.json     manifest: format, created_at, schema_version, counts
    db/memory.sqlite      a consistent snapshot (SQLite online backup API, journal=DELETE)
    wiki/...              the wiki tree including wiki/.git
    config.toml           when the data dir has one

``create_backup`` only *reads* the data dir (a ``mode=ro`` connection is the backup
source), so the writer stays live and keeps accepting writes while it runs. ``extract_archive``
refuses any entry outside that layout before anything is written.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import tarfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from aimem_common.db.connect import open_reader
from aimem_common.errors import BadRequestError

FORMAT_VERSION = 1
MANIFEST_NAME = "aimem-backup.json"
DB_MEMBER = "db/memory.sqlite"
_TOP_LEVEL = {"db", "wiki", "config.toml", MANIFEST_NAME}
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
            }
        finally:
            dst.close()
    finally:
        src.close()
    return counts


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
