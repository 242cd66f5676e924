#!/usr/bin/env python3
"""Draw the tuning sweep's chart for docs/tuning.md: for each setting and workload, the
median ops/s relative to the defaults' median, with the range of the setting's runs as a
whisker. Plain SVG, no dependencies.

    scripts/tuning-chart.py SWEEP.jsonl OUT.svg
"""
import collections
import json
import statistics
import sys

WORKLOADS = [("ycsb-load", "load"), ("ycsb-a", "A"), ("ycsb-b", "B"), ("ycsb-d", "D")]
DEFAULT = "shale"
LO, HI = 0.3, 1.7  # ratio axis
NOISE = (0.8, 1.25)  # the band docs/tuning.md reads as "no measurable effect"


def main(src, dst):
    runs = collections.defaultdict(list)
    order = []
    for line in open(src):
        r = json.loads(line)
        runs[(r["engine"], r["workload"])].append(r["ops_per_sec"])
        if r["engine"] not in order:
            order.append(r["engine"])
    settings = [s for s in order if s != DEFAULT]
    base = {w: statistics.median(runs[(DEFAULT, w)]) for w, _ in WORKLOADS}

    label_w, panel_w, gap, row_h, top = 150, 200, 20, 20, 50
    width = label_w + len(WORKLOADS) * (panel_w + gap)
    height = top + len(settings) * row_h + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="14">'
        "ops/s relative to the defaults (median of 3 runs; whisker: min to max run)</text>",
    ]

    def x_of(panel, ratio):
        ratio = min(max(ratio, LO), HI)
        x0 = label_w + panel * (panel_w + gap)
        return x0 + (ratio - LO) / (HI - LO) * panel_w

    for p, (w, name) in enumerate(WORKLOADS):
        x0 = label_w + p * (panel_w + gap)
        out.append(
            f'<rect x="{x_of(p, NOISE[0]):.1f}" y="{top - 8}" '
            f'width="{x_of(p, NOISE[1]) - x_of(p, NOISE[0]):.1f}" '
            f'height="{len(settings) * row_h + 8}" fill="#eeeeee"/>'
        )
        out.append(
            f'<text x="{x0 + panel_w / 2}" y="{top - 16}" text-anchor="middle" '
            f'font-weight="bold">{name}</text>'
        )
        for tick in (0.5, 1.0, 1.5):
            x = x_of(p, tick)
            out.append(
                f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" '
                f'y2="{top + len(settings) * row_h}" stroke="#999" '
                f'stroke-width="{1.5 if tick == 1.0 else 0.5}"/>'
            )
            out.append(
                f'<text x="{x:.1f}" y="{top + len(settings) * row_h + 14}" '
                f'text-anchor="middle" font-size="10">{tick:.1f}x</text>'
            )
        for i, s in enumerate(settings):
            vals = runs[(s, w)]
            if not vals:
                continue
            med = statistics.median(vals) / base[w]
            lo, hi = min(vals) / base[w], max(vals) / base[w]
            y = top + i * row_h
            color = "#2a9d4a" if med > NOISE[1] else "#d04040" if med < NOISE[0] else "#888888"
            x1, x2 = sorted((x_of(p, 1.0), x_of(p, med)))
            out.append(
                f'<rect x="{x1:.1f}" y="{y + 4}" width="{max(x2 - x1, 1):.1f}" '
                f'height="{row_h - 8}" fill="{color}"/>'
            )
            out.append(
                f'<line x1="{x_of(p, lo):.1f}" y1="{y + row_h / 2}" '
                f'x2="{x_of(p, hi):.1f}" y2="{y + row_h / 2}" stroke="black"/>'
            )
    for i, s in enumerate(settings):
        y = top + i * row_h + row_h / 2 + 4
        out.append(f'<text x="{label_w - 8}" y="{y}" text-anchor="end">{s}</text>')
    out.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
