"""Backups carry the workstream ledger segments, and a restore makes them match the rows.

The ledger is written through the writer's real batch path (``workstream.append``); the
archive is made and extracted by ``aimem_common.archive`` as ``aimem backup`` / ``restore``
do (the whole round trip through a stack is in ``tests/e2e/test_workstream_backup.py``).
"""

from __future__ import annotations

import io
import sqlite3
import tarfile
from pathlib import Path

import pytest

from aimem_common.archive import create_backup, extract_archive, reconcile_segments
from aimem_common.errors import BadRequestError

RUN_A, RUN_B, RUN_C = "a" * 32, "b" * 32, "c" * 32


def _run(wh, run: str, harness: str, texts: list[str]) -> dict:
    wh.ok("workstream.lease", {"action": "open", "run_id": run, "harness": harness, "cwd": "/w/repo"}, root="/w/repo")
    got = wh.ok("workstream.append", {"run_id": run, "events": [{"role": "user", "text": t} for t in texts]})
    wh.ok("workstream.lease", {"action": "release", "run_id": run})
    return got


def _segments(data_dir: Path) -> dict[str, str]:
    root = data_dir / "raw" / "workstreams"
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _backup(wh, tmp_path: Path) -> Path:
    out = tmp_path / "b.tar.gz"
    work = tmp_path / "work"
    work.mkdir()
    manifest = create_backup(wh.settings.data_dir, wh.settings.db_path, out, work)
    assert manifest["workstream_events"] == wh.count("SELECT count(*) FROM workstream_events")
    return out


def _restore(archive: Path, dest: Path) -> dict[str, int]:
    extract_archive(archive, dest)
    conn = sqlite3.connect(dest / "db" / "memory.sqlite")
    try:
        return reconcile_segments(dest, conn)
    finally:
        conn.close()


def test_the_archive_holds_every_segment_and_a_restore_keeps_them_byte_for_byte(wh, tmp_path) -> None:
    _run(wh, RUN_A, "claude-code", ["the wombat retry policy", "three tries"])
    _run(wh, RUN_B, "codex", ["picked up the wombat policy"])
    before = _segments(wh.settings.data_dir)
    assert len(before) == 2
    archive = _backup(wh, tmp_path)
    with tarfile.open(archive) as tar:
        names = {m.name for m in tar if m.isfile()}
    assert {f"raw/workstreams/{k}" for k in before} <= names
    dest = tmp_path / "restored"
    assert _restore(archive, dest) == {"kept": 2, "removed": 0, "rewritten": 0}
    assert _segments(dest) == before


def test_a_restore_drops_segments_no_row_names_and_writes_back_missing_ones(wh, tmp_path) -> None:
    first = _run(wh, RUN_A, "claude-code", ["the wombat retry policy"])
    second = _run(wh, RUN_B, "codex", ["picked up the wombat policy"])
    before = _segments(wh.settings.data_dir)
    archive = _backup(wh, tmp_path)
    dest = tmp_path / "restored"
    extract_archive(archive, dest)
    # What a live copy can hold beside the snapshot: a segment appended after it (no row
    # names it), a leftover temp file; and a segment a purge removed before it was copied.
    wid = second["segment"].split("/")[2]
    late = dest / "raw" / "workstreams" / wid / "0000000003-0000000003.jsonl"
    late.write_text('{"seq": 3, "text": "after the snapshot"}\n')
    (late.parent / ".aimem-tmp-x").write_text("partial")
    stray = dest / "raw" / "workstreams" / ("f" * 32)
    stray.mkdir()
    (stray / "0000000001-0000000001.jsonl").write_text("{}\n")
    (dest / first["segment"]).unlink()
    conn = sqlite3.connect(dest / "db" / "memory.sqlite")
    try:
        got = reconcile_segments(dest, conn)
    finally:
        conn.close()
    assert got == {"kept": 1, "removed": 3, "rewritten": 1}
    assert _segments(dest) == before  # the rewritten segment is the writer's, byte for byte
    assert not stray.exists()


def test_an_archive_without_segments_gets_them_from_its_rows(wh, tmp_path) -> None:
    """An archive made before backups carried the ledger: the rows hold the same text."""
    _run(wh, RUN_A, "claude-code", ["the wombat retry policy", "three tries"])
    before = _segments(wh.settings.data_dir)
    archive = _backup(wh, tmp_path)
    old = tmp_path / "old.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(old, "w:gz") as dst:
        for m in src:
            if not m.name.startswith("raw"):
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    assert _restore(old, tmp_path / "restored") == {"kept": 0, "removed": 0, "rewritten": 1}
    assert _segments(tmp_path / "restored") == before


@pytest.mark.parametrize("name", ["raw/other/x.jsonl", "raw/spool/a", "raw/x"])
def test_an_archive_entry_elsewhere_under_raw_is_refused(tmp_path, name) -> None:
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for member, data in (("db/memory.sqlite", b""), (name, b"{}")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BadRequestError) as err:
        extract_archive(bad, tmp_path / "out")
    assert err.value.code == "bad_archive" and "outside the backup layout" in err.value.message


def test_a_row_naming_an_odd_segment_is_never_a_path_to_write(wh, tmp_path) -> None:
    _run(wh, RUN_A, "claude-code", ["the wombat retry policy"])
    archive = _backup(wh, tmp_path)
    dest = tmp_path / "restored"
    extract_archive(archive, dest)
    conn = sqlite3.connect(dest / "db" / "memory.sqlite")
    try:
        conn.execute("UPDATE workstream_events SET segment = '../../../escape.jsonl'")
        conn.commit()
        got = reconcile_segments(dest, conn)
    finally:
        conn.close()
    assert got["rewritten"] == 0 and not (tmp_path / "escape.jsonl").exists()
    assert _segments(dest) == {}  # the real segment is no longer named by its row either
