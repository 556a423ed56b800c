"""The maintainer's Prometheus families (one instance per app, in its own registry)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from aimem_common.telemetry import Telemetry


@dataclass(slots=True)
class MaintMetrics:
    """Job and LLM metrics. Labels: ``job`` (sweep|lint|consolidate|auto_improve|embed|…),
    ``outcome`` (ok|error|skipped|…), ``candidate`` (``provider/model``)."""

    job_runs: Counter
    job_duration: Histogram
    llm_calls: Counter
    llm_latency: Histogram
    llm_circuit_open: Gauge
    sweep_pages: Counter
    mirror_deliveries: Counter
    mirror_pending: Gauge
    mirror_last_success: Gauge
    auto_improve_eval: Counter

    @classmethod
    def create(cls, telemetry: Telemetry) -> "MaintMetrics":
        return cls(
            job_runs=telemetry.counter(
                "aimem_maint_job_runs_total", "Maintainer job runs by task and outcome (`task`, not `job`: Prometheus owns that label)", ["task", "outcome"]
            ),
            job_duration=telemetry.histogram(
                "aimem_maint_job_duration_seconds",
                "Maintainer job duration in seconds",
                ["task"],
                buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
            ),
            llm_calls=telemetry.counter(
                "aimem_llm_calls_total",
                "LLM calls by candidate and outcome (ok|rate_limited|server_error|timeout|connection|"
                "request_error|invalid_output|circuit_open)",
                ["candidate", "outcome"],
            ),
            llm_latency=telemetry.histogram(
                "aimem_llm_latency_seconds",
                "LLM call latency in seconds by candidate",
                ["candidate"],
                buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            ),
            llm_circuit_open=telemetry.gauge(
                "aimem_llm_circuit_open", "1 while the candidate's 30 s circuit is open", ["candidate"]
            ),
            sweep_pages=telemetry.counter(
                "aimem_maint_sweep_pages_total", "Pages acted on by the forget sweep", ["action"]
            ),
            mirror_deliveries=telemetry.counter(
                "aimem_mirror_deliveries_total",
                "[[mirrors]] notification attempts by mirror and outcome (ok|failed|skipped)",
                ["mirror", "outcome"],
            ),
            mirror_pending=telemetry.gauge(
                "aimem_mirror_pending", "Changes not yet acknowledged by the mirror (its outbox)", ["mirror"]
            ),
            mirror_last_success=telemetry.gauge(
                "aimem_mirror_last_success_timestamp_seconds", "Unix time of the mirror's last 2xx", ["mirror"]
            ),
            auto_improve_eval=telemetry.counter(
                "aimem_auto_improve_eval_total", "[auto_improve.eval] gate answers by outcome (accept|reject)",
                ["outcome"],
            ),
        )
