#!/usr/bin/env python3
"""Draws a pcgx simulation trace (pcgx simulate --trace FILE) as an SVG timeline.

  scripts/trace_svg.py TRACE.json OUT.svg [--tracks REGEX] [--max-tracks N] [--title TEXT]

One row per track (a device's compute stream, a link port, a sync channel),
tasks as bars coloured by kind. --tracks keeps the tracks whose name matches
REGEX (Python syntax), at most --max-tracks of them, in the trace's order.
Uses only the standard library.
"""
import argparse
import json
import re
import sys
from xml.sax.saxutils import escape

COLOURS = {
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "transfer": "#59a14f",
    "gradient transfer": "#8cd17d",
    "collective": "#76b7b2",
    "gradient sync": "#e15759",
    "update": "#b07aa1",
    "overhead": "#9d9d9d",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--tracks", default=".*")
    ap.add_argument("--max-tracks", type=int, default=40)
    ap.add_argument("--title", default="")
    ap.add_argument("--width", type=int, default=1200)
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            doc = json.load(f)
        events = doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {a.trace}: not a trace-event file ({e})", file=sys.stderr)
        return 2
    try:
        keep = re.compile(a.tracks)
    except re.error as e:
        print(f"error: --tracks: {e}", file=sys.stderr)
        return 2
    names = {}
    order = []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            key = (e["pid"], e["tid"])
            names[key] = e["args"]["name"]
            order.append(key)
    rows = [k for k in order if keep.search(names[k])][: a.max_tracks]
    index = {k: i for i, k in enumerate(rows)}
    bars = [e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in index]
    end = max((e["ts"] + e["dur"] for e in events if e.get("ph") == "X"), default=1.0)
    left, top, row_h, right = 230, 40 if a.title else 20, 16, 20
    plot_w = a.width - left - right
    legend_y = top + len(rows) * row_h + 34
    height = legend_y + 30
    x = lambda us: left + plot_w * us / end
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{a.width}" height="{height}" fill="white"/>']
    if a.title:
        out.append(f'<text x="{left}" y="22" font-size="14">{escape(a.title)}</text>')
    for k, i in index.items():
        y = top + i * row_h
        if i % 2 == 0:
            out.append(f'<rect x="{left}" y="{y}" width="{plot_w}" height="{row_h}" fill="#f4f4f4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(names[k])}</text>')
    for e in bars:
        y = top + index[(e["pid"], e["tid"])] * row_h + 2
        w = max(0.5, x(e["ts"] + e["dur"]) - x(e["ts"]))
        colour = COLOURS.get(e.get("cat", ""), "#333333")
        out.append(f'<rect x="{x(e["ts"]):.2f}" y="{y}" width="{w:.2f}" height="{row_h - 4}" fill="{colour}">'
                   f'<title>{escape(e["name"])}: {e["dur"] / 1e3:.3f} ms at {e["ts"] / 1e3:.3f} ms</title></rect>')
    axis_y = top + len(rows) * row_h + 4
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="black"/>')
    ms = end / 1e3
    step = next(s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 1e4) if ms / s <= 12)
    t = 0.0
    while t <= ms + 1e-9:
        xx = x(t * 1e3)
        out.append(f'<line x1="{xx:.1f}" y1="{axis_y}" x2="{xx:.1f}" y2="{axis_y + 4}" stroke="black"/>')
        out.append(f'<text x="{xx:.1f}" y="{axis_y + 16}" text-anchor="middle">{t:g} ms</text>')
        t += step
    lx = left
    for cat, colour in COLOURS.items():
        out.append(f'<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16}" y="{legend_y + 10}">{cat}</text>')
        lx += 30 + 7 * len(cat)
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {a.out} ({len(rows)} tracks, {len(bars)} tasks)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
