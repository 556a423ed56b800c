"""Server-side layout of the web's SVG pictures: numbers in, coordinates out (no markup here).

Templates (``_pictures.html``) draw what these return; every label stays agent data that
Jinja2 escapes. Layouts are deterministic: the same data draws the same picture.
"""

from __future__ import annotations

import math
from typing import Any

# Fill + pattern per series: told apart without colour (hatching, dots, cross, bars).
PATTERNS = ("solid", "hatch", "dots", "cross", "hbar", "vbar")
COLOURS = ("#0b57d0", "#b3261e", "#146c2e", "#7d5260", "#8a5a00", "#3a4a5a")
CATEGORIES = ("prompt", "tool", "failure", "compaction", "other")
SPACING = 16  # px wanted between neighbouring nodes of a ring (a node is 8–12 px across)
MAX_EDGES = 1200  # past this the lines are a grey disc; the table still lists every node


def series_style(i: int) -> dict[str, str]:
    """Return ``{"pattern", "colour"}`` of the ``i``-th series (agents, kinds)."""
    return {"pattern": PATTERNS[i % len(PATTERNS)], "colour": COLOURS[i % len(COLOURS)]}


def bar_chart(days: list[str], agents: list[str], value: dict[str, dict[str, int]], *, width: int = 720,
              height: int = 120) -> dict[str, Any]:
    """Lay out stacked bars, one per day, a segment per agent: ``value[day][agent]``.

    Returns ``{"width", "height", "bars": [{"day", "x", "w", "total", "segments": [{"agent",
    "n", "y", "h", "style"}]}], "max", "ticks": [{"y", "label"}], "labels": [{"x", "day"}]}``.
    """
    left, top, bottom = 36, 8, 22
    plot_h = height - top - bottom
    peak = max((sum(value.get(d, {}).values()) for d in days), default=0)
    scale_max = _nice(peak)
    slot = (width - left - 4) / max(1, len(days))
    bars = []
    for i, d in enumerate(days):
        x = left + i * slot + 1
        y = top + plot_h
        segs = []
        for j, agent in enumerate(agents):
            n = value.get(d, {}).get(agent, 0)
            if not n:
                continue
            h = max(1.5, plot_h * n / scale_max)
            y -= h
            segs.append({"agent": agent, "n": n, "y": round(y, 1), "h": round(h, 1), "style": series_style(j)})
        bars.append({"day": d, "x": round(x, 1), "w": round(max(2.0, slot - 2), 1), "segments": segs,
                     "total": sum(s["n"] for s in segs)})
    ticks = [{"y": round(top + plot_h - plot_h * f, 1), "label": _fmt(scale_max * f)} for f in (0, 0.5, 1)]
    every = max(1, math.ceil(len(days) / 7))
    labels = [{"x": round(left + i * slot + slot / 2, 1), "day": d[5:]} for i, d in enumerate(days) if i % every == 0]
    return {"width": width, "height": height, "bars": bars, "max": peak, "ticks": ticks, "labels": labels,
            "left": left, "base": top + plot_h}


def _nice(n: float) -> float:
    if n <= 0:
        return 1
    mag = 10 ** math.floor(math.log10(n))
    for m in (1, 2, 5, 10):
        if n <= m * mag:
            return m * mag
    return 10 * mag


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def strip(marks: list[dict[str, Any]], *, width: int = 720, page_size: int = 200) -> dict[str, Any]:
    """Lay out a session's observations left to right in arrival order, one row per category.

    Each mark gets ``x``, ``y`` (its category's row), ``offset`` (the timeline screen that
    lists it: ``index // page_size * page_size``). Returns ``{"width", "height", "rows":
    [{"category", "y"}], "marks"}``.
    """
    left, row_h = 96, 22
    rows = [{"category": c, "y": 12 + i * row_h} for i, c in enumerate(CATEGORIES)]
    ys = {r["category"]: r["y"] for r in rows}
    n = max(1, len(marks))
    step = (width - left - 10) / n
    out = [{**m, "x": round(left + 5 + m["index"] * step + step / 2, 1), "y": ys[m["category"]],
            "offset": m["index"] // page_size * page_size} for m in marks]
    return {"width": width, "height": 12 + len(CATEGORIES) * row_h, "rows": rows, "marks": out, "left": left,
            "counts": {c: sum(1 for m in marks if m["category"] == c) for c in CATEGORIES}}


def chains(chains: list[list[dict[str, Any]]], *, box_w: int = 190, gap: int = 46, row_h: int = 92,
           max_per_row: int = 6) -> dict[str, Any]:
    """Lay out handoff chains as rows of boxes joined by arrows (a long chain wraps).

    ``box_w`` (px) holds the box's words: "#id " and an 18-character title at 12 px, or an
    agent name of 12 characters and a date (a narrower box let them run over its border).

    Each link gets ``x``, ``y`` and, when it continues, an ``arrow`` (``x1,y1,x2,y2``).
    Returns ``{"width", "height", "boxes": [...], "arrows": [...], "box_w", "box_h"}``.
    """
    box_h = 58
    boxes, arrows = [], []
    row = 0
    for chain in chains:
        prev = None
        for i, link in enumerate(chain):
            col = i % max_per_row
            if i and col == 0:
                row += 1
            x, y = 10 + col * (box_w + gap), 10 + row * row_h
            box = {**link, "x": x, "y": y, "chain_start": i == 0}
            boxes.append(box)
            if prev is not None:
                kind = "fold" if prev["status"] == "superseded" else "claim"
                if prev["y"] == y:
                    arrows.append({"x1": prev["x"] + box_w, "y1": y + box_h / 2, "x2": x - 4, "y2": y + box_h / 2,
                                   "kind": kind})
                else:
                    arrows.append({"x1": prev["x"] + box_w / 2, "y1": prev["y"] + box_h, "x2": x + box_w / 2,
                                   "y2": y - 4, "kind": kind})
            prev = box
        row += 1
    width = 20 + max_per_row * (box_w + gap) - gap
    return {"width": width, "height": max(row_h, 10 + row * row_h), "boxes": boxes, "arrows": arrows,
            "box_w": box_w, "box_h": box_h}


def rings(graph: dict[str, Any], *, size: int = 720, label_max: int = 60) -> dict[str, Any]:
    """Lay out a graph on concentric rings by ``hop`` (0 in the middle), nodes of a ring in a
    stable order (kind, path), so hundreds of nodes stay apart and the layout never moves.

    Adds ``x``, ``y``, ``r`` (node radius), ``label`` (shown for the center, hop 1 and while
    there are at most ``label_max`` nodes) and ``anchor`` to each node; edges get their end
    points. Returns ``{"size", "nodes", "edges", "rings": [{"r"}]}``.
    """
    nodes = graph["nodes"]
    c = size / 2
    by_ring: dict[int, list[dict]] = {}
    for n in nodes:
        by_ring.setdefault(n["hop"], []).append(n)
    levels = sorted(by_ring)
    outer = c - 70
    # each ring's band is wider the more nodes it holds (a hub's 250 backlinks get room)
    centered = bool(levels) and levels[0] == 0 and len(by_ring[0]) == 1
    outer_levels = levels[1:] if centered else levels
    weight = {lv: max(1.0, math.sqrt(len(by_ring[lv]) / 12)) for lv in outer_levels}
    unit = outer / max(1.0, sum(weight.values()))
    radius, band, acc = {}, {}, 0.0
    if centered:
        radius[levels[0]], band[levels[0]] = 0.0, 0.0
    for lv in outer_levels:
        acc += weight[lv] * unit
        radius[lv], band[lv] = acc, weight[lv] * unit
    many = len(nodes) > label_max
    pos = {}
    for lv in levels:
        ring = sorted(by_ring[lv], key=lambda n: (n["kind"] or "", n["path"]))
        r = radius[lv]
        # a crowded ring zigzags over ``lanes`` radii inside its band, so neighbours stay ≥ SPACING apart
        lanes = max(1, min(4, math.ceil(len(ring) * SPACING / (2 * math.pi * r)))) if r else 1
        for i, n in enumerate(ring):
            a = -math.pi / 2 + 2 * math.pi * i / max(1, len(ring)) + (lv * 0.37 if r else 0)
            rr = r - (i % lanes) * (band[lv] * 0.6 / lanes)
            x, y = c + rr * math.cos(a), c + rr * math.sin(a)
            n["x"], n["y"] = round(x, 1), round(y, 1)
            n["r"] = 9 if n.get("center") else (6 if lv <= 1 and len(ring) <= 60 else 4)
            n["label"] = (not many) or n.get("center") or lv == 0 or (lv == 1 and len(ring) <= 24)
            n["anchor"] = "start" if x >= c else "end"
            n["lx"] = round(x + (12 if x >= c else -12), 1)
            pos[n["id"]] = n
    edges = [{**e, "x1": pos[e["from"]]["x"], "y1": pos[e["from"]]["y"], "x2": pos[e["to"]]["x"],
              "y2": pos[e["to"]]["y"]} for e in graph["edges"] if e["from"] in pos and e["to"] in pos]
    return {"size": size, "nodes": nodes, "edges": edges[:MAX_EDGES], "edges_left_out": max(0, len(edges) - MAX_EDGES),
            "rings": [{"r": round(radius[lv], 1)} for lv in levels if radius[lv]], "center": c}


def sparkline(points: list[tuple[float, float | None]], *, width: int = 240, height: int = 40) -> dict[str, Any]:
    """Lay out ``(t, value)`` points (``None``: no sample) as a polyline over ``width`` × ``height``.

    Returns ``{"width", "height", "path": "x,y x,y …", "last", "min", "max", "n"}``.
    """
    vals = [(t, v) for t, v in points if v is not None]
    if not vals:
        return {"width": width, "height": height, "path": "", "last": None, "min": None, "max": None, "n": 0}
    t0, t1 = vals[0][0], vals[-1][0]
    lo, hi = min(v for _, v in vals), max(v for _, v in vals)
    span_t, span_v = (t1 - t0) or 1, (hi - lo) or 1
    pts = " ".join(f"{2 + (t - t0) / span_t * (width - 4):.1f},{height - 3 - (v - lo) / span_v * (height - 6):.1f}"
                   for t, v in vals)
    return {"width": width, "height": height, "path": pts, "last": vals[-1][1], "min": lo, "max": hi, "n": len(vals)}
