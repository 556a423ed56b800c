"""JSON logs, a per-service Prometheus registry, OpenTelemetry tracing.

* ``setup_logging(service, level, log_format)`` — one line per record on stderr: JSON (one
  object) when stderr is not a terminal, readable text on a terminal (``log_format`` ``auto``),
  or as ``log_format`` (``json``/``text``) says; both carry the same fields.
* ``Telemetry`` — a ``CollectorRegistry`` per app (no global default registry, invariant 12)
  with the HTTP request histogram every service exports, plus ``metrics_response()``.
* ``setup_tracing(service, endpoint)`` — OTLP/HTTP export when an endpoint is configured
  (``OTEL_EXPORTER_OTLP_ENDPOINT`` through ``config.load``), otherwise the no-op default.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import time
from datetime import UTC, datetime

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_configured_tracing = False


def record_fields(record: logging.LogRecord, service: str, formatter: logging.Formatter) -> dict[str, str]:
    """The fields of one log line: ts, level, service, logger, msg, and trace_id/exc when set."""
    out = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname.lower(),
        "service": service,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        out["trace_id"] = format(ctx.trace_id, "032x")
    if record.exc_info:
        out["exc"] = formatter.formatException(record.exc_info)
    return out


class JsonFormatter(logging.Formatter):
    """Render a record as one JSON line with ts, level, logger, msg, service, trace ids."""

    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(record_fields(record, self.service, self), ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Render a record for a person: ``HH:MM:SS.mmm LEVEL service logger: msg [trace_id=…]``,
    then the traceback (the JSON line's fields; the time is UTC)."""

    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        f = record_fields(record, self.service, self)
        line = f"{f['ts'][11:23]} {f['level'].upper():<7} {f['service']} {f['logger']}: {f['msg']}"
        if "trace_id" in f:
            line += f" [trace_id={f['trace_id']}]"
        return line + (f"\n{f['exc']}" if "exc" in f else "")


LOG_FORMATS = ("auto", "text", "json")


def resolve_log_format(log_format: str, stream=None) -> str:
    """``text`` or ``json``: ``auto`` is text when ``stream`` (stderr) is a terminal, else JSON."""
    if log_format != "auto":
        return log_format
    stream = sys.stderr if stream is None else stream
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):
        return "json"


def setup_logging(service: str, level: str = "info", log_format: str = "auto") -> None:
    """Send logs to stderr at ``level``, as JSON lines or text (``resolve_log_format``); idempotent."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_aimem", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    text = resolve_log_format(log_format) == "text"
    handler.setFormatter(TextFormatter(service) if text else JsonFormatter(service))
    handler._aimem = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Transport libraries log every connect/request at INFO: keep them to warnings so the
# service's own lines stay readable.
    for noisy in ("nats", "uvicorn.access", "httpx", "httpcore", "watchdog"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def setup_tracing(service: str, endpoint: str | None, exporter: SpanExporter | None = None) -> None:
    """Install a TracerProvider for ``service`` once per process.

    With ``exporter`` (tests: in-memory) or an OTLP ``endpoint`` spans are exported in
    batches; with neither the API stays the no-op default (zero overhead).
    """
    global _configured_tracing  # process-level OTel state is global by OTel's own design
    if _configured_tracing or (exporter is None and not endpoint):
        return
    provider = TracerProvider(resource=Resource.create({"service.name": f"aimem-{service}"}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured_tracing = True


def tracing_enabled() -> bool:
    """True once ``setup_tracing`` installed an exporting provider in this process.

    Hot paths skip creating spans without one: the API's no-op spans still cost a context
    switch and an attributes dict each (about a tenth of the ingress's CPU per hook).
    """
    return _configured_tracing


class Telemetry:
    """Metrics of one service instance: its registry and the shared HTTP families."""

    def __init__(self, service: str):
        self.service = service
        self.registry = CollectorRegistry(auto_describe=True)
        self.http_latency = Histogram(
            "aimem_http_request_duration_seconds",
            "HTTP request latency in seconds by route",
            ["service", "method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.up = Gauge("aimem_up", "1 while the service is running", ["service"], registry=self.registry)
        self.up.labels(service).set(1)
        self.started = Gauge(
            "aimem_start_time_seconds", "Unix time the service started", ["service"], registry=self.registry
        )
        self.started.labels(service).set(time.time())
        # Objects the collector leaves out since start-up (``service.freeze_after_startup``).
        self.gc_frozen = Gauge("aimem_gc_frozen_objects", "Objects frozen out of garbage collection after start-up",
                               registry=self.registry)
        self.gc_frozen.set_function(gc.get_freeze_count)

    def counter(self, name: str, doc: str, labels: list[str] | tuple[str, ...] = ()) -> Counter:
        """Create a counter in this service's registry (``aimem_`` prefix expected)."""
        return Counter(name, doc, list(labels), registry=self.registry)

    def histogram(self, name: str, doc: str, labels=(), buckets=Histogram.DEFAULT_BUCKETS) -> Histogram:
        """Create a histogram in this service's registry."""
        return Histogram(name, doc, list(labels), registry=self.registry, buckets=buckets)

    def gauge(self, name: str, doc: str, labels=()) -> Gauge:
        """Create a gauge in this service's registry."""
        return Gauge(name, doc, list(labels), registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        """Return ``(body, content_type)`` of the Prometheus exposition."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
