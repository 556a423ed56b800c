"""Prometheus metrics of the writer (``aimem_writer_*``), registered on the app's registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from aimem_common.telemetry import Telemetry

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


@dataclass(slots=True)
class WriterMetrics:
    """The writer's metric families (thread-safe; the writer thread updates them)."""

    batch_size: Histogram
    apply_seconds: Histogram
    commands: Counter
    errors: Counter
    duplicates: Counter
    commits: Counter
    git_commits: Counter
    git_seconds: Histogram
    pending: Gauge
    bulk_pending: Gauge
    acks: Counter
    in_progress_acks: Counter
    watcher_reindexed: Counter
    dead_letters: Counter
    dead_letters_open: Gauge
    store_fault: Gauge
    store_faults: Counter
    batch_failures: Counter
    replication_lag: Gauge
    wiki_pushes: Counter

    @classmethod
    def create(cls, telemetry: Telemetry) -> "WriterMetrics":
        """Register every family on ``telemetry.registry``."""
        t = telemetry
        m = cls(
            batch_size=t.histogram("aimem_writer_batch_size", "Commands per applied batch", buckets=_SIZE_BUCKETS),
            apply_seconds=t.histogram(
                "aimem_writer_apply_seconds", "Batch apply latency (transaction + file flush) in seconds",
                buckets=_LATENCY_BUCKETS,
            ),
            commands=t.counter("aimem_writer_commands_total", "Commands applied successfully, by op", ["op"]),
            errors=t.counter("aimem_writer_errors_total", "Commands answered with an error, by op and code",
                             ["op", "code"]),
            duplicates=t.counter("aimem_writer_duplicates_total",
                                 "Commands answered from ingest_keys (replays, retries), by op", ["op"]),
            commits=t.counter("aimem_writer_commits_total", "SQLite batch transactions committed"),
            git_commits=t.counter("aimem_writer_git_commits_total", "Wiki git checkpoints committed"),
            git_seconds=t.histogram("aimem_writer_git_checkpoint_seconds", "Git checkpoint latency in seconds",
                                    buckets=_LATENCY_BUCKETS),
            pending=t.gauge("aimem_writer_consumer_pending",
                            "Commands waiting for the writer (num_pending + num_ack_pending)"),
            bulk_pending=t.gauge("aimem_writer_bulk_pending",
                                 "Commands of the bulk lane (imports) waiting for the writer (num_pending +"
                                 " num_ack_pending of writer-bulk); large during an import, by design"),
            acks=t.counter("aimem_writer_messages_total", "Messages settled, by action (ack|nak|term)", ["action"]),
            in_progress_acks=t.counter("aimem_writer_in_progress_acks_total",
                                       "In-progress acks sent for messages held longer than ack_wait_s/3"),
            watcher_reindexed=t.counter("aimem_writer_watcher_reindexed_total",
                                        "Hand-edited wiki files reindexed, by outcome", ["outcome"]),
            dead_letters=t.counter("aimem_writer_dead_letters_total",
                                   "Commands given up and kept as dead letters, by op", ["op"]),
            dead_letters_open=t.gauge("aimem_writer_dead_letters_open",
                                      "Dead letters not yet replayed (aimem dead-letters list)"),
            store_fault=t.gauge("aimem_writer_store_fault",
                                "1 while the writer cannot store (disk full, I/O error), by reason", ["reason"]),
            store_faults=t.counter("aimem_writer_store_faults_total",
                                   "Batches held because the store refused a write, by reason", ["reason"]),
            batch_failures=t.counter("aimem_writer_batch_failures_total",
                                     "Failed applies retried in place (an unexpected error, not a store fault), by scope:"
                                     " batch = an attempt of the whole batch, command = one command applied alone,"
                                     " post_apply = a step after the COMMIT (checkpoint, replies, events, acks)",
                                     ["scope"]),
            # Registered even when replication is off, so dashboards and rules always resolve.
            replication_lag=t.gauge("aimem_replication_lag_seconds",
                                    "Seconds the off-node copy is behind, by target (db = Litestream, wiki = git push)",
                                    ["target"]),
            wiki_pushes=t.counter("aimem_replication_wiki_pushes_total",
                                  "Pushes of the wiki to its git remote, by outcome (ok|error)", ["outcome"]),
        )
        for reason in ("disk_full", "io_error"):  # exported at 0 from the start (alerts, dashboards)
            m.store_fault.labels(reason).set(0)
        for scope in ("batch", "command", "post_apply"):
            m.batch_failures.labels(scope)
        return m
