"""Metric names used by PromQL in the rules and the dashboard, and those a /metrics page offers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

_NAME = re.compile(r'"[^"]*"|\b(aimem_[a-zA-Z0-9_]+)\b(?!\s*(?:=|!=|=~|!~))')


def metric_names(expr: str) -> set[str]:
    """Return the ``aimem_*`` metric names in a PromQL expression (not labels, not strings)."""
    return {m.group(1) for m in _NAME.finditer(expr) if m.group(1)}


def rule_exprs(path: Path) -> dict[str, str]:
    """``{rule name: expr}`` of a Prometheus rule file."""
    doc = yaml.safe_load(path.read_text())
    return {r.get("alert") or r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def dashboard_exprs(path: Path) -> dict[str, str]:
    """``{panel title #n: expr}`` of a Grafana dashboard JSON (rows' nested panels too)."""
    dash = json.loads(path.read_text())
    out = {}

    def walk(panels):
        for p in panels:
            for i, t in enumerate(p.get("targets", [])):
                if t.get("expr"):
                    out[f"{p['title']} #{i}"] = t["expr"]
            walk(p.get("panels", []))

    walk(dash["panels"])
    return out


def exposed_names(text: str) -> set[str]:
    """Sample names a Prometheus text exposition offers, including those of families that
    have no labelled child yet (from ``# TYPE``: counter → ``_total``, histogram → buckets)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(None, 3)
            kind = kind.strip()
            if kind == "counter":
                names |= {family if family.endswith("_total") else family + "_total", family}
            elif kind == "histogram":
                names |= {family + s for s in ("_bucket", "_sum", "_count")}
            elif kind == "summary":
                names |= {family, family + "_sum", family + "_count"}
            else:
                names.add(family)
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names
