"""Pictures without a browser: the SVG layouts, the metrics ring, escaping of hostile labels."""

from __future__ import annotations

import asyncio
import math

import httpx

from aimem_common.config import Settings
from aimem_common.models import Scope
from aimem_query.web import layout
from aimem_query.web.health import WINDOW_S, HealthSampler, Sample, parse_metrics, rates
from aimem_query.web.render import Renderer

HOSTILE = "<script>alert(1)</script></svg>\"onload=alert(2) x"
SCOPE = Scope("default", "app", "w1", "p1")


def test_bar_chart_stacks_agents_and_keeps_bars_inside_the_plot():
    days = ["2026-01-01", "2026-01-02", "2026-01-03"]
    chart = layout.bar_chart(days, ["a", "b"], {"2026-01-02": {"a": 3, "b": 1}, "2026-01-03": {"b": 7}}, height=120)
    assert chart["max"] == 7 and [b["total"] for b in chart["bars"]] == [0, 4, 7]
    a, b = chart["bars"][1]["segments"]
    assert a["y"] + a["h"] == chart["base"] and math.isclose(b["y"] + b["h"], a["y"], abs_tol=0.2)  # stacked
    assert a["style"]["pattern"] != b["style"]["pattern"]  # told apart without colour
    assert all(s["y"] >= 0 for bar in chart["bars"] for s in bar["segments"])


def test_rings_put_the_center_in_the_middle_and_each_hop_further_out():
    nodes = [{"id": 1, "path": "c.md", "kind": "concept", "hop": 0, "center": True}] + [
        {"id": 10 + i, "path": f"n{i}.md", "kind": "note", "hop": 1 + (i >= 40), "center": False} for i in range(300)]
    pic = layout.rings({"nodes": nodes, "edges": [{"from": 1, "to": 10, "kind": "link"}]}, size=720)
    c = pic["center"]
    r = {n["id"]: math.hypot(n["x"] - c, n["y"] - c) for n in pic["nodes"]}
    assert r[1] == 0 and all(0 < r[n["id"]] < c for n in nodes[1:])
    assert max(r[n["id"]] for n in nodes if n["hop"] == 1) < min(r[n["id"]] for n in nodes if n["hop"] == 2)
    pts = [(n["x"], n["y"]) for n in pic["nodes"]]
    closest = min(math.dist(p, q) for i, p in enumerate(pts) for q in pts[i + 1:])
    assert closest >= 9  # 301 nodes, none drawn on top of another (radius 4–6)
    assert not nodes[5]["label"] and nodes[0]["label"]  # 300 nodes: only the center and small rings are labelled
    again = layout.rings({"nodes": [dict(n) for n in nodes], "edges": []}, size=720)
    assert [(n["x"], n["y"]) for n in again["nodes"]] == [(n["x"], n["y"]) for n in pic["nodes"]]  # deterministic


def test_metrics_ring_turns_counters_into_rates_and_stays_bounded():
    text = ('# TYPE aimem_hook_events_total counter\naimem_hook_events_total{agent="a",kind="x"} 3\n'
            'aimem_hook_events_total{agent="b",kind="y"} 2\n')
    assert parse_metrics(text)["aimem_hook_events_total"] == 5
    samples = [Sample(0, 0, 0, 0, 4, None), Sample(60, 30, 120, 1, 2, None), Sample(120, 10, 180, 1, 0, None)]
    r = rates(samples)
    assert r["hooks_per_min"] == [(60, 30.0), (120, None)]  # a counter that went down (restart): no point
    assert r["applied_per_s"] == [(60, 2.0), (120, 1.0)]
    assert [v for _, v in r["writer_lag"]] == [4, 2, 0]
    sampler = HealthSampler(Settings(), interval_s=5)
    assert sampler.ring.maxlen == WINDOW_S // 5 + 1
    for i in range(5000):
        sampler.ring.append(Sample(i, i, i, 0, 0, None))
    assert len(sampler.ring) == sampler.ring.maxlen


def test_prometheus_is_read_when_configured(monkeypatch):
    settings = Settings(query={"prometheus_url": "http://prom.invalid:9090"})
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.params["query"])
        return httpx.Response(200, json={"data": {"result": [{"values": [[1.0, "2"], [61.0, "4"]]}]}})

    real = httpx.AsyncClient
    monkeypatch.setattr(httpx, "AsyncClient", lambda **kw: real(transport=httpx.MockTransport(handler)))
    sampler = HealthSampler(settings)
    sampler.start()  # no sampling task: Prometheus has the history
    assert sampler._task is None
    series = asyncio.run(sampler.series())
    assert series["hooks_per_min"] == [(1.0, 2.0), (61.0, 4.0)]
    assert any("aimem_writer_dead_letters_open" in q for q in seen)


def test_hostile_labels_are_escaped_in_every_picture():
    env = Renderer().env
    base = {"user": None, "csrf": "x", "here": "/", "query": "", "scope": SCOPE}
    node = {"id": 1, "path": HOSTILE, "title": HOSTILE, "kind": "note", "workspace": "default", "project": "app",
            "hop": 0, "degree": 0, "center": True}
    data = {"nodes": [node], "edges": [], "left_out": 0, "total": 1}
    from aimem_query.web.pictures import graph_view
    html = env.get_template("graph.html").render(**base, data=data, pic=graph_view(data), center=HOSTILE, hops=1)
    link = {"id": 1, "title": HOSTILE, "status": "open", "from_agent": HOSTILE, "from_session_id": HOSTILE,
            "accepted_by": None, "accepted_session_id": None, "superseded_by": None, "at": "2026-01-01T00:00:00Z",
            "stale": True, "automatic": False, "to_agent": None}
    chains = {"chains": [[link]], "open": 1, "stale": 1, "superseded": 0, "shown": 1, "total": 1}
    html += env.get_template("chains.html").render(**base, data=chains, pic=layout.chains(chains["chains"]))
    from aimem_query.web.pictures import activity_view
    act = {"days": ["2026-01-01"], "agents": [HOSTILE], "since": "2026-01-01", "until": "2026-01-01",
           "cells": {("2026-01-01", HOSTILE): {"sessions": 1, "observations": 2}},
           "totals": {"sessions": {"2026-01-01": 1}, "observations": {"2026-01-01": 2}}}
    html += env.get_template("activity.html").render(**base, data=act, chart=activity_view(act), days=1)
    assert "<script>alert" not in html and '"onload=' not in html and "</svg>\"" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;/svg&gt;&#34;onload=alert(2) x" in html
    assert html.count("<script") == 3  # the three screens' /web/static/app.js, nothing else
    assert "STALE" in html
