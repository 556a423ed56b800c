"""``bench/report.py`` renders RESULTS.md from the newest raw file of each benchmark."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import report  # noqa: E402

MACHINE = {"cores": 2, "cpu": "Test CPU", "mem_gib": 23.5, "python": "3.11.7", "commit": "abc1234",
           "date": "2026-12-01T00:00:00+00:00", "loadavg": [0.4, 0.5, 0.6]}


def _write(d: Path, name: str, stamp: str, data: dict) -> None:
    (d / f"{name}-{stamp}.json").write_text(json.dumps({"bench": name, "machine": MACHINE, **data}))


def test_newest_file_wins_and_verdicts_follow_the_targets(tmp_path):
    _write(tmp_path, "writer_throughput", "20261201T010000", {"obs_per_s": 9000, "obs_per_cpu_s": 9100, "mean_batch": 10})
    _write(tmp_path, "writer_throughput", "20261201T020000", {"obs_per_s": 5999, "obs_per_cpu_s": 6100, "mean_batch": 10})
    # a differently named result beginning with the same name is not the writer's
    _write(tmp_path, "writer_throughput-w2", "20261201T030000", {"obs_per_s": 1, "obs_per_cpu_s": 1, "mean_batch": 1})
    _write(tmp_path, "query_latency", "20261201T020000", {"sizes": [
        {"pages": 100_000, "project_scoped": {"p50_ms": 5.0, "p95_ms": 24.0, "cpu_p95_ms": 20.0},
         "global": {"p50_ms": 9.0, "p95_ms": 51.0, "cpu_p95_ms": 40.0}, "footprint": {"disk_mb_per_100k": 300, "peak_rss_mb": 90}},
        {"pages": 1_000_000, "project_scoped": {"p50_ms": 50.0, "p95_ms": 99.0}, "global": {"p50_ms": 90.0, "p95_ms": 150.0}},
    ]})
    text = report.render(tmp_path)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    writer = rows["writer apply rate, 20,000-observation backlog"]
    assert "5,999 obs/s" in writer and "not met" in writer and "writer_throughput-20261201T020000.json" in writer
    assert "**met**" in rows["`memory_query` p95 at 100k pages, project-scoped"]
    assert "not met" in rows["`memory_query` p95 at 100k pages, global"]
    assert "**met**" in rows["`memory_query` p95 at 1M pages, project-scoped"]
    assert "**met**" in rows["`memory_query` p95 at 1M pages, global"]
    assert "300 MB on disk per 100k pages" in rows["footprint at 100k pages"]
    assert "not run" in rows["hook_ingest"]
    assert "load 0.4/0.5" in text
