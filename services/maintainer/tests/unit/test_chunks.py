"""What the embedding backfill embeds for a page: windows of its lines, and for a session page
also the captured turns its bounded digest left out."""

from __future__ import annotations

from aimem_common.chunking import CHUNK_CHARS, MAX_CHUNKS, chunks, units_of
from aimem_maintainer.embeddings import page_chunks


def test_windows_overlap_by_one_line_and_carry_the_title():
    lines = [f"line {i}: " + "word " * 20 for i in range(40)]
    out = chunks("Runbook", units_of("\n".join(lines)))
    assert len(out) > 3 and all(c.startswith("Runbook\n") and len(c) <= CHUNK_CHARS for c in out)
    for a, b in zip(out, out[1:]):
        assert a.splitlines()[-1] == b.splitlines()[1]  # the next window starts with the last line
    assert out[-1].splitlines()[-1] == lines[-1].strip()
    assert len(chunks("T", units_of("x " * 400 + "\n") * 1)) >= 1
    assert chunks("Empty", []) == ["Empty"]
    assert len(chunks("Huge", units_of("\n".join(lines * 20)), max_chunks=MAX_CHUNKS)) == MAX_CHUNKS


def test_a_session_page_adds_the_turns_its_digest_cut():
    body = "# Session s1\n\n## Task\n\nplan the ledger migration\n\n## Later prompts\n\n- check the backups"
    turns = ["plan the ledger migration", "check the backups", "the replica in Frankfurt lags by an hour"]
    out = page_chunks({"title": "Session s1", "body": body, "turns": turns})
    text = "\n".join(out)
    assert "Frankfurt" in text and text.count("plan the ledger migration") == 1  # kept once
    assert page_chunks({"title": "Note", "body": "just a note", "turns": []}) == ["Note\njust a note"]
