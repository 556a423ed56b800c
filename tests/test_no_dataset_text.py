"""No tracked file carries LoCoMo's text.

LoCoMo (``../shared/data/locomo``) is licensed CC BY-NC for use in tests: the benchmarks and
tests read it in place and keep only counts and scores. A question, an answer or a dialogue
turn copied into the repository (a results file, a fixture, a constant in a bench) would
redistribute it; this test fails on any such line in the files git tracks.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ahocorasick_rs

REPO = Path(__file__).resolve().parents[1]
MIN_CHARS = 20  # shorter strings ("7 May 2023", "Hey Mel!") occur in ordinary text


def _dataset_strings(path: Path) -> list[str]:
    """Every string of ``path`` of at least ``MIN_CHARS`` characters — questions, answers,
    dialogue turns, session dates, summaries, observations, image captions — and each
    sentence of the longer ones (a quoted sentence of a summary is as much a copy)."""
    out: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            out.add(value)
            out.update(part for part in value.replace("\n", ". ").split(". "))

    walk(json.loads(path.read_text()))
    return sorted({s.strip() for s in out if len(s.strip()) >= MIN_CHARS})


def test_no_tracked_file_holds_locomo_text(shared_dir: Path) -> None:
    strings = _dataset_strings(shared_dir / "data" / "locomo" / "locomo-dev.json")
    assert len(strings) > 1000  # the dataset was read, not an empty list
    scan = ahocorasick_rs.AhoCorasick(strings)
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    found = {}
    for name in tracked.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file() or path.stat().st_size > 20_000_000:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        hits = scan.find_matches_as_strings(text)
        if hits:
            found[name] = hits[0][:80]
    assert found == {}, f"LoCoMo text in tracked files (read it from ../shared instead): {found}"
