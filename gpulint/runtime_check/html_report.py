"""The HTML report of a recorded run (`profile --html FILE`, `gpulint report RUN`): one
self-contained file to open offline or attach to a CI job -- the verdict, the figures (beside a
baseline's, with the difference and the noise), the series drawn as inline SVG, the fixes to try
with the script's findings linked to the rule docs, and the machine it ran on.

No script, stylesheet, font or image is loaded from anywhere: the charts are SVG written here
(a few line charts need no plotting library, and a library embedded offline would add hundreds
of kilobytes to every report).  The page runs no JavaScript.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from gpulint.runtime_check.compare import (
    NOISE_NOTE,
    SPEEDUP,
    describe,
    differences,
    format_change,
    format_noise,
)
from gpulint.runtime_check.figures import format_value
from gpulint.runtime_check.history import History, RunRecord, Series, when

WIDTH, HEIGHT = 880, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 34
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
HEATMAP_FROM = 9  # per-core CPU of this many cores or more is drawn as a heat map, not lines
CHART_ORDER = [
    "step time",
    "data wait per step",
    "step time per run",
    "GPU utilization",
    "GPU memory",
    "CPU of the run",
    "CPU per core",
]

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; margin: 0;
       background: #f6f7f9; }
main { max-width: 940px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #555; } code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.command { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 6px 10px; overflow-x: auto;
           white-space: pre; }
.verdict { background: #fff; border-left: 5px solid #1f77b4; border-radius: 6px; padding: 10px 14px; margin-top: 16px; }
.verdict.bad { border-color: #d62728; } .verdict.good { border-color: #2ca02c; }
.verdict strong { font-size: 16px; } .warning { color: #8a5a00; }
table { border-collapse: collapse; background: #fff; width: 100%; border: 1px solid #dde1e6; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid #eceff2; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; } td.num { text-align: right; white-space: nowrap; }
.better { color: #1a7f37; font-weight: 600; } .worse { color: #c62828; font-weight: 600; } .muted { color: #777; }
figure { margin: 12px 0 18px; background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 8px 8px 4px; }
figcaption { font-weight: 600; margin: 0 0 4px 6px; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
.legend span { display: inline-block; margin: 0 14px 4px 6px; font-size: 12px; }
.legend i { display: inline-block; width: 22px; height: 0; vertical-align: middle; margin-right: 5px; }
pre.diff { background: #fff; border: 1px solid #dde1e6; padding: 8px; overflow-x: auto; }
footer { margin-top: 32px; color: #777; font-size: 12px; }
"""


def render(run: RunRecord, baseline: RunRecord | None = None, history: History | None = None) -> str:
    """The report of `run` (beside `baseline` when given) as one HTML document."""
    parts = [
        _header(run),
        _verdict(run),
        _figures(run, baseline, history),
        _memory_advice(run),
        _charts(run, baseline),
        _fixes(run),
        _syncs(run),
        _diff(run),
        _environment(run, baseline),
    ]
    title = f"gpulint {run.kind}: {run.script or run.command}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        + "".join(p for p in parts if p)
        + f"<footer>gpulint {escape(str(run.environment.get('gpulint', '')))} -- this file loads nothing from "
        "the network and runs no script.</footer></main></body></html>\n"
    )


def write(path: Path, run: RunRecord, baseline: RunRecord | None = None, history: History | None = None) -> None:
    """Write the report (rendered first, so a failure leaves no half page), as --json files are written."""
    page = render(run, baseline, history)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")


# -- sections ------------------------------------------------------------------------------
def _header(run: RunRecord) -> str:
    commit = (
        f" · commit <code>{escape(run.git_commit[:12])}</code>{' (uncommitted changes)' if run.git_dirty else ''}"
        if run.git_commit
        else ""
    )
    wall = f" · {run.wall_seconds:.0f} s" if run.wall_seconds is not None else ""
    return (
        f"<h1>gpulint {escape(run.kind)} · run {run.id if run.id is not None else '(not recorded)'}</h1>"
        f'<div class="meta">{escape(when(run.started_at))} · {escape(run.host or "")}{commit}{wall}</div>'
        f'<h2>Command</h2><div class="command"><code>{escape(run.command)}</code></div>'
    )


def _verdict(run: RunRecord) -> str:
    verdict = run.meta.get("verdict")
    if verdict:
        kind = "bad" if verdict["headline"].startswith(("input-bound", "sync-bound")) else ""
        items = "".join(f"<li>{escape(r)}</li>" for r in verdict.get("reasons", []))
        warnings = "".join(f'<p class="warning">warning: {escape(w)}</p>' for w in verdict.get("warnings", []))
        return (
            f'<div class="verdict {kind}"><strong>Verdict: {escape(verdict["headline"])}</strong> -- '
            f"{escape(verdict['advice'])}<ul>{items}</ul>{warnings}</div>"
        )
    if run.kind == "verify" and run.verdict:
        speedup = run.figure(SPEEDUP)
        kind = {"confirmed": "good", "slowdown": "bad"}.get(run.verdict, "")
        said = f" (speedup {speedup.value:.2f}x: {escape(speedup.note)})" if speedup and speedup.value else ""
        warnings = "".join(f'<p class="warning">warning: {escape(w)}</p>' for w in run.meta.get("warnings", []))
        return f'<div class="verdict {kind}"><strong>{escape(run.verdict)}</strong>{said}{warnings}</div>'
    return ""


def _figures(run: RunRecord, baseline: RunRecord | None, history: History | None) -> str:
    if baseline is None:
        cells = "".join(
            f'<tr><td>{escape(f.name)}</td><td class="num">{escape(format_value(f.value, f.unit))}</td>'
            f'<td class="muted">{escape(f.note)}</td></tr>'
            for f in run.figures
        )
        return f"<h2>Figures</h2><table><tr><th>figure</th><th>value</th><th>note</th></tr>{cells}</table>"
    rows = []
    for d in differences(history, baseline, run):
        status = d.direction or ("within noise" if d.beyond_noise is False else "")
        rows.append(
            f'<tr><td>{escape(d.name)}</td><td class="num">{escape(format_value(d.a, d.unit))}</td>'
            f'<td class="num">{escape(format_value(d.b, d.unit))}</td><td class="num">{escape(format_change(d))}</td>'
            f'<td class="muted">{escape(format_noise(d))}</td><td class="{d.direction}">{escape(status)}</td></tr>'
        )
    return (
        f'<h2>Figures</h2><p class="meta">baseline: {escape(describe(baseline))}</p><table><tr><th>figure</th>'
        f"<th>baseline</th><th>this run</th><th>change</th><th>noise</th><th></th></tr>{''.join(rows)}</table>"
        f'<p class="muted">{escape(NOISE_NOTE)}</p>'
    )


def _charts(run: RunRecord, baseline: RunRecord | None) -> str:
    names = list(dict.fromkeys(s.chart for s in run.series))
    names.sort(key=lambda n: CHART_ORDER.index(n) if n in CHART_ORDER else len(CHART_ORDER))
    charts = [_chart(name, run.chart(name), baseline.chart(name) if baseline else [], baseline) for name in names]
    return "<h2>Over the run</h2>" + "".join(charts) if charts else ""


def _memory_advice(run: RunRecord) -> str:
    """What the memory headroom says about the batch size (the text report's `Memory:` lines)."""
    advice = run.meta.get("memory_advice") or []
    if not advice:
        return ""
    return "<h2>Memory and batch size</h2><ul>" + "".join(f"<li>{escape(a)}</li>" for a in advice) + "</ul>"


def _fixes(run: RunRecord) -> str:
    from gpulint.rules import find_rule
    from gpulint.rules.docs import rule_url

    verdict = run.meta.get("verdict") or {}
    recommendations = verdict.get("recommendations") or []
    if not recommendations:
        return ""
    lint = run.meta.get("lint") or []
    rows = []
    for r in recommendations:
        rule = find_rule(r["code"])
        code = f'<a href="{escape(rule_url(rule))}">{escape(r["code"])}</a>' if rule else escape(r["code"])
        hits = [h for h in lint if h["code"] == r["code"]]
        found = "<br>".join(f"line {h['row']}: {escape(h['message'])}" for h in hits) or '<span class="muted">-</span>'
        rows.append(
            f"<tr><td>{code}</td><td>{escape(r['action'])}</td><td>{escape(r['expected_gain'])}</td>"
            f"<td>{found}</td></tr>"
        )
    return (
        "<h2>Fixes to try, in order of expected gain</h2><table><tr><th>rule</th><th>fix</th><th>expected gain</th>"
        f"<th>in this script</th></tr>{''.join(rows)}</table>"
    )


def _syncs(run: RunRecord) -> str:
    syncs = run.meta.get("syncs") or []
    if not syncs:
        return ""
    rows = "".join(
        f'<tr><td><code>{escape(s["where"])}</code></td><td class="num">{s["per_step"]:.1f}</td>'
        f"<td><code>{escape(s['source'])}</code></td><td>{escape(s['rule'] or '-')}</td></tr>"
        for s in syncs
    )
    return (
        "<h2>Host-device syncs in the measured steps</h2><table><tr><th>where</th><th>per step</th><th>line</th>"
        f"<th>rule</th></tr>{rows}</table>"
    )


def _diff(run: RunRecord) -> str:
    diff = run.meta.get("diff")
    return f'<h2>The fix</h2><pre class="diff">{escape(diff)}</pre>' if diff else ""


def _environment(run: RunRecord, baseline: RunRecord | None) -> str:
    def cell(record: RunRecord, key: str) -> str:
        value = record.environment.get(key)
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(value) or "none"
        return escape(str(value if value not in (None, "") else "-"))

    keys = [
        ("cpu", "CPU"),
        ("cores", "cores"),
        ("gpus", "GPUs"),
        ("driver", "driver"),
        ("python", "Python"),
        ("frameworks", "frameworks"),
        ("platform", "platform"),
    ]
    header = "<tr><th></th><th>this run</th>" + ("<th>baseline</th>" if baseline else "") + "</tr>"
    rows = "".join(
        f"<tr><td>{label}</td><td>{cell(run, key)}</td>"
        + (f"<td>{cell(baseline, key)}</td>" if baseline else "")
        + "</tr>"
        for key, label in keys
    )
    return f"<h2>Machine</h2><table>{header}{rows}</table>"


# -- charts --------------------------------------------------------------------------------
def nice_ticks(low: float, high: float, count: int = 5, whole: bool = False) -> list[float]:
    """Round tick values covering [low, high]; `whole`: whole numbers only (steps, runs)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if whole:
        step = max(1.0, math.ceil(step))
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _scale(unit: str, top: float) -> tuple[float, str]:
    """Display factor and unit for an axis: seconds under a second read in milliseconds."""
    if unit == "s" and top < 1:
        return 1000.0, "ms"
    return 1.0, unit


def _chart(name: str, series: list[Series], base: list[Series], baseline: RunRecord | None) -> str:
    if name == "CPU per core" and len(series) >= HEATMAP_FROM:
        return _heatmap(name, series)
    colours = {s.name: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    drawn = [(s, colours[s.name], False) for s in series]
    # A baseline's series: dashed, in the colour of the same series of this run.
    drawn += [(s, colours.get(s.name, PALETTE[(len(series) + i) % len(PALETTE)]), True) for i, s in enumerate(base)]
    points = [(x, y) for s, _, _ in drawn for x, y in zip(s.x, s.y, strict=False)]
    if not points:
        return ""
    unit, x_unit = series[0].unit, series[0].x_unit
    x_low, x_high = min(p[0] for p in points), max(p[0] for p in points)
    y_low = min(0.0, min(p[1] for p in points))
    y_high = max(p[1] for p in points)
    if unit == "%":
        y_low, y_high = 0.0, max(100.0, y_high)
    factor, shown_unit = _scale(unit, y_high)
    y_ticks = nice_ticks(y_low * factor, y_high * factor * (1.0 if unit == "%" else 1.05))
    x_ticks = nice_ticks(x_low, x_high, 8, whole=x_unit in ("step", "run"))
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / ((x1 - x0) or 1) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y * factor - y0) / ((y1 - y0) or 1) * plot_h

    svg = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" aria-label="{escape(name)}">']
    if x_unit == "s" and x0 < 0 < x1:  # before the measured window
        svg.append(
            f'<rect x="{px(x0):.1f}" y="{TOP}" width="{px(0) - px(x0):.1f}" height="{plot_h}" fill="#f1f1f1"/>'
            f'<text x="{px(x0) + 4:.1f}" y="{TOP + 12}">start-up and warm-up</text>'
        )
    for tick in y_ticks:
        y = TOP + plot_h - (tick - y0) / ((y1 - y0) or 1) * plot_h
        svg.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick(tick)}</text>'
        )
    for tick in x_ticks:
        x = px(tick)
        svg.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 4}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{TOP + plot_h + 17}" text-anchor="middle">{_tick(tick)}</text>'
        )
    svg.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 3}" text-anchor="end">{escape(_x_label(x_unit))}</text>'
        f'<text x="12" y="{TOP + plot_h / 2:.0f}" transform="rotate(-90 12 {TOP + plot_h / 2:.0f})" '
        f'text-anchor="middle">{escape(shown_unit)}</text>'
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#999"/>'
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#999"/>'
    )
    legend = []
    for s, colour, is_baseline in sorted(drawn, key=lambda d: not d[2]):  # the baseline underneath
        coordinates = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(s.x, s.y, strict=False))
        dash = ' stroke-dasharray="5 3"' if is_baseline else ""
        label = f"{s.label} (baseline run {baseline.id})" if is_baseline and baseline else s.label
        svg.append(
            f'<polyline class="series" points="{coordinates}" fill="none" stroke="{colour}" '
            f'stroke-width="1.6"{dash}><title>{escape(label)}</title></polyline>'
        )
        if len(s.x) == 1:  # a single point draws no line
            svg.append(f'<circle cx="{px(s.x[0]):.1f}" cy="{py(s.y[0]):.1f}" r="3" fill="{colour}"/>')
        swatch = f"border-top: 3px {'dashed' if is_baseline else 'solid'} {colour}"
        legend.append(f'<span><i style="{swatch}"></i>{escape(label)}</span>')
    svg.append("</svg>")
    return (
        f"<figure><figcaption>{escape(name)}</figcaption>{''.join(svg)}"
        f'<div class="legend">{"".join(legend)}</div></figure>'
    )


def _heatmap(name: str, series: list[Series]) -> str:
    """One row per core, one cell per sample, darker when busier."""
    columns = max(len(s.y) for s in series)
    plot_w, row_h = WIDTH - LEFT - RIGHT, max(3.0, min(14.0, 360 / len(series)))
    height = TOP + row_h * len(series) + BOTTOM
    x_low = min(s.x[0] for s in series if s.x)
    x_high = max(s.x[-1] for s in series if s.x)
    cell_w = plot_w / max(1, columns)
    svg = [f'<svg viewBox="0 0 {WIDTH} {height:.0f}" width="100%" role="img" aria-label="{escape(name)}">']
    for row, s in enumerate(series):
        y = TOP + row * row_h
        if row % max(1, len(series) // 8) == 0:
            svg.append(f'<text x="{LEFT - 6}" y="{y + row_h - 1:.1f}" text-anchor="end">{escape(s.label)}</text>')
        for column, value in enumerate(s.y):
            shade = max(0.0, min(1.0, value / 100))
            svg.append(
                f'<rect class="cell" x="{LEFT + column * cell_w:.1f}" y="{y:.1f}" width="{cell_w + 0.3:.1f}" '
                f'height="{row_h:.1f}" '
                f'fill="rgb({255 - int(223 * shade)},{255 - int(136 * shade)},{255 - int(75 * shade)})"/>'
            )
    bottom = TOP + row_h * len(series)
    if x_low < 0 < x_high:  # where the measured steps start
        x = LEFT + (0 - x_low) / (x_high - x_low) * plot_w
        svg.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 4}" y2="{bottom + 4:.1f}" stroke="#d62728"/>'
            f'<text x="{x:.1f}" y="{bottom + 16:.0f}" text-anchor="middle">0</text>'
        )
    svg.append(
        f'<text x="{LEFT}" y="{bottom + 16:.0f}">{_tick(x_low)} s</text>'
        f'<text x="{WIDTH - RIGHT}" y="{bottom + 16:.0f}" text-anchor="end">{_tick(x_high)} s · white idle, '
        "dark blue 100% busy; red line: the measured steps start</text></svg>"
    )
    return f"<figure><figcaption>{escape(name)}</figcaption>{''.join(svg)}</figure>"


def _tick(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _x_label(x_unit: str) -> str:
    return {"s": "seconds from the start of the measured steps", "step": "measured step", "run": "run"}.get(
        x_unit, x_unit
    )
