"""The HTML report of a recorded run (`profile --html FILE`, `gpulint report RUN`): one
self-contained file to open offline or attach to a CI job -- the verdict and the command to run
next, the figures (beside a baseline's, with the difference and the noise), the series drawn as
inline SVG, the fixes to try with the script's findings linked to the rule docs, and the machine
it ran on.

No script, stylesheet, font or image is loaded from anywhere: the charts are SVG written here
(a few charts need no plotting library, and a library embedded offline would add hundreds of
kilobytes to every report).  The page runs no JavaScript.

A run may come from a history file someone else wrote (a CI cache, a shared folder), so every
stored value is untrusted: text is escaped wherever it goes (element text and attribute values),
numbers are written only after `check_run` found them to be numbers -- a stored "number" that is
not one is refused with an error naming the field, never inserted -- and the page's
Content-Security-Policy forbids every load, form submission and `<base>` change.  Navigation by
`<meta http-equiv=refresh>` (which no CSP can forbid) needs markup, which escaping rules out.
docs/safety.md "The HTML report" lists these promises and their tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from gpulint.linter.run.safe_files import OutputFile
from gpulint.runtime_check.compare import (
    NOISE_NOTE,
    SPEEDUP,
    describe,
    differences,
    format_change,
    format_noise,
)
from gpulint.runtime_check.costs import basis_from_meta, cost_lines, money
from gpulint.runtime_check.figures import format_value
from gpulint.runtime_check.history import History, HistoryError, RunRecord, Series, when
from gpulint.runtime_check.nodes import JobReport

WIDTH, HEIGHT = 880, 230
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 34
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
CHART_ORDER = [
    "step time",
    "step time per run",
    "throughput per run",
    "GPU utilization",
    "GPU memory",
    "CPU of the run",
    "CPU per core",
]
# A chart whose series are a part of another chart's (data wait is spent inside the step): drawn
# as the shaded lower part of that chart, not as a second chart of nearly the same shape.
PART_OF = {"data wait per step": "step time"}
HEAT_CHARTS = {"CPU per core"}  # one row per series, shaded by value: many lines at 100% hide each other
DRAWABLE = 1e15  # points beyond this (or not finite) are left out: they would overflow the axes
# `default-src 'none'` forbids every load (scripts, styles, fonts, images, frames, connections);
# inline styles are the page's own; forms and <base> are not directives default-src covers.
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'none'; base-uri 'none'"

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
.next { margin: 10px 0 0; } .next .command { margin-top: 4px; background: #f6f7f9; }
table { border-collapse: collapse; background: #fff; width: 100%; border: 1px solid #dde1e6; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid #eceff2; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; } td.num { text-align: right; white-space: nowrap; }
.better { color: #1a7f37; font-weight: 600; } .worse { color: #c62828; font-weight: 600; } .muted { color: #777; }
figure { margin: 12px 0 18px; background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 8px 8px 4px; }
figcaption { font-weight: 600; margin: 0 0 4px 6px; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
.legend span { display: inline-block; margin: 0 14px 4px 6px; font-size: 12px; }
.legend i { display: inline-block; width: 22px; height: 0; vertical-align: middle; margin-right: 5px; }
.legend i.dot { width: 8px; height: 8px; border-radius: 50%; }
.legend i.area { height: 10px; opacity: 0.45; }
pre.diff { background: #fff; border: 1px solid #dde1e6; padding: 8px; overflow-x: auto; }
footer { margin-top: 32px; color: #777; font-size: 12px; }
"""


class ReportError(HistoryError):
    """A stored run the page cannot show as stored (a number that is not one, a list that is not
    a list): the history was damaged or written by someone else.  One line, naming the field."""


def render(
    run: RunRecord,
    baseline: RunRecord | None = None,
    history: History | None = None,
    nodes: JobReport | None = None,
    price: float | None = None,
) -> str:
    """The report of `run` (beside `baseline` when given; with the merged view of its multi-node
    job's `nodes`, whose runs passed check_run) as one HTML document; ReportError when either run
    holds a value of the wrong type.  With a GPU-hour `price`, what the run's measured waste (or a
    confirmed speed-up's saving) costs, beside the verdict."""
    check_run(run, "run")
    if baseline is not None:
        check_run(baseline, "baseline")
    parts = [
        _header(run),
        _verdict(run),
        _nodes(nodes),
        _costs(run, price),
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
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        + "".join(p for p in parts if p)
        + f"<footer>gpulint {_text(run.environment.get('gpulint', ''))} -- this file loads nothing from "
        "the network and runs no script.</footer></main></body></html>\n"
    )


def write(
    path: OutputFile | Path,
    run: RunRecord,
    baseline: RunRecord | None = None,
    history: History | None = None,
    nodes: JobReport | None = None,
    price: float | None = None,
) -> None:
    """Write the report (rendered first, so a failure leaves no half page), as --json files are
    written: WriteRefused (a sentence) when it cannot be."""
    page = render(run, baseline, history, nodes, price)
    target = path if isinstance(path, OutputFile) else OutputFile.checked(path)
    target.write(page.encode("utf-8"))


# -- what a stored run must hold to be drawn -------------------------------------------------
class _Maybe:
    """A value that may be missing or null."""

    def __init__(self, shape: object) -> None:
        self.shape = shape


TEXT, NUMBER = str, float
# The meta fields the page shows (records.py writes them); others are never read here.
META_SHAPE = {
    "verdict": _Maybe(
        {
            "headline": TEXT,
            "advice": TEXT,
            "reasons": _Maybe([TEXT]),
            "warnings": _Maybe([TEXT]),
            "recommendations": _Maybe(
                [
                    {
                        "code": TEXT,
                        "action": TEXT,
                        "expected_gain": TEXT,
                        "line": _Maybe(TEXT),
                        "next": _Maybe({"why": TEXT, "command": TEXT}),
                    }
                ]
            ),
        }
    ),
    "next_command": _Maybe({"why": TEXT, "command": TEXT}),
    "memory_advice": _Maybe([TEXT]),
    "lint": _Maybe([{"code": TEXT, "row": NUMBER, "message": TEXT}]),
    "syncs": _Maybe([{"where": TEXT, "per_step": NUMBER, "source": TEXT, "rule": _Maybe(TEXT)}]),
    "warnings": _Maybe([TEXT]),
    "diff": _Maybe(TEXT),
    # a node of a multi-node job (nodes.py merges these across the job's runs)
    "job": _Maybe({"id": TEXT, "node": NUMBER, "nodes": NUMBER, "host": TEXT, "note": _Maybe(TEXT)}),
    "ranks": _Maybe(
        [
            {
                "rank": NUMBER,
                "step_time": _Maybe(NUMBER),
                "collective_wait": _Maybe(NUMBER),
                "data_wait": _Maybe(NUMBER),
            }
        ]
    ),
    "cost": _Maybe(
        {"kind": TEXT, "share": NUMBER, "step_seconds": NUMBER, "gpus": NUMBER, "steps_per_epoch": _Maybe(NUMBER)}
    ),
}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(value: Any, shape: object, field: str) -> None:
    if isinstance(shape, _Maybe):
        if value is None:
            return
        shape = shape.shape
    if shape is TEXT:
        ok, wanted = isinstance(value, str), "text"
    elif shape is NUMBER:
        ok, wanted = _is_number(value), "a number"
    elif isinstance(shape, list):
        ok, wanted = isinstance(value, list), "a list"
    else:
        assert isinstance(shape, dict), shape
        ok, wanted = isinstance(value, dict), "an object"
    if not ok:
        shown = repr(value)
        raise ReportError(f"{field} is {shown[:60] + '...' if len(shown) > 60 else shown}, not {wanted}")
    if isinstance(shape, list):
        for i, item in enumerate(value):
            _check(item, shape[0], f"{field}[{i}]")
    elif isinstance(shape, dict):
        for key, inner in shape.items():
            _check(value.get(key), inner, f"{field}.{key}")


def check_run(run: RunRecord, which: str = "run") -> None:
    """Refuse (ReportError) a run with a value the page would show of another type than the one
    it is written as: every number is a finite int or float, every text a string."""
    prefix = f"{which} {run.id}" if run.id is not None else which
    columns: list[tuple[str, object, object]] = [
        ("id", run.id, _Maybe(NUMBER)),
        ("kind", run.kind, TEXT),
        ("command", run.command, TEXT),
        ("script", run.script, _Maybe(TEXT)),
        ("verdict", run.verdict, _Maybe(TEXT)),
        ("started_at", run.started_at, NUMBER),
        ("wall_seconds", run.wall_seconds, _Maybe(NUMBER)),
        ("git_commit", run.git_commit, _Maybe(TEXT)),
        ("host", run.host, _Maybe(TEXT)),
        ("environment", run.environment, {}),
        ("meta", run.meta, META_SHAPE),
    ]
    for i, f in enumerate(run.figures):
        columns += [
            (f"figures[{i}].name", f.name, TEXT),
            (f"figures[{i}].value", f.value, _Maybe(NUMBER)),
            (f"figures[{i}].note", f.note, TEXT),
            (f"figures[{i}].noise", f.noise, _Maybe(NUMBER)),
        ]
    for i, s in enumerate(run.series):
        columns += [
            (f"series[{i}].{key}", getattr(s, key), TEXT) for key in ("name", "label", "chart", "unit", "x_unit")
        ]
    for name, value, shape in columns:
        try:
            _check(value, shape, name)
        except ReportError as exc:
            raise ReportError(f"cannot draw {prefix}: {exc}") from None
    try:
        when(run.started_at)
    except (OverflowError, OSError, ValueError):
        raise ReportError(f"cannot draw {prefix}: started_at is {run.started_at!r}, not a time") from None


def _text(value: Any) -> str:
    """A stored value shown as text (the environment's, free-form): any type, escaped."""
    if isinstance(value, dict):
        value = ", ".join(f"{k} {v}" for k, v in value.items())
    elif isinstance(value, list):
        value = ", ".join(map(str, value)) or "none"
    return escape(str(value))


# -- sections ------------------------------------------------------------------------------
def _header(run: RunRecord) -> str:
    commit = (
        f" · commit <code>{escape(run.git_commit[:12])}</code>{' (uncommitted changes)' if run.git_dirty else ''}"
        if run.git_commit
        else ""
    )
    wall = f" · {run.wall_seconds:.0f} s" if run.wall_seconds is not None else ""
    number = "(not recorded)" if run.id is None else f"{run.id:.0f}"
    return (
        f"<h1>gpulint {escape(run.kind)} · run {number}</h1>"
        f'<div class="meta">{escape(when(run.started_at))} · {escape(run.host or "")}{commit}{wall}</div>'
        f'<h2>Command</h2><div class="command"><code>{escape(run.command)}</code></div>'
    )


# The verdicts that say the code leaves the hardware waiting (drawn with a red edge); compute-bound
# and inconclusive are not.
FIX_THE_CODE_FIRST = ("input-bound", "sync-bound", "host-bound", "straggler", "communication-bound")


def _verdict(run: RunRecord) -> str:
    verdict = run.meta.get("verdict")
    if verdict:
        kind = "bad" if verdict["headline"].startswith(FIX_THE_CODE_FIRST) else ""
        items = "".join(f"<li>{escape(r)}</li>" for r in verdict.get("reasons") or [])
        warnings = "".join(f'<p class="warning">warning: {escape(w)}</p>' for w in verdict.get("warnings") or [])
        return (
            f'<div class="verdict {kind}"><strong>Verdict: {escape(verdict["headline"])}</strong> -- '
            f"{escape(verdict['advice'])}<ul>{items}</ul>{warnings}{_next_command(run)}</div>"
        )
    if run.kind == "verify" and run.verdict:
        speedup = run.figure(SPEEDUP)
        kind = {"confirmed": "good", "slowdown": "bad"}.get(run.verdict, "")
        said = f" (speedup {speedup.value:.2f}x: {escape(speedup.note)})" if speedup and speedup.value else ""
        warnings = "".join(f'<p class="warning">warning: {escape(w)}</p>' for w in run.meta.get("warnings") or [])
        return (
            f'<div class="verdict {kind}"><strong>{escape(run.verdict)}</strong>{said}{warnings}'
            f"{_next_command(run)}</div>"
        )
    return ""


def _costs(run: RunRecord, price: float | None) -> str:
    """What it costs (costs.py): only with a price, from the stored basis that check_run typed and
    basis_from_meta bounded; the price is the caller's (a flag or the configuration), a number."""
    if price is None or not _is_number(price):
        return ""
    basis = basis_from_meta(run.meta.get("cost"))
    if basis is None:
        return (
            '<h2>What it costs</h2><p class="muted">Not estimated: this run measured no share of GPU time to price.</p>'
        )
    lines = cost_lines(basis, price)
    items = "".join(f"<li>{escape(line)}</li>" for line in lines[:-1])
    return (
        f'<h2>What it costs <span class="muted">(an estimate, at {escape(money(price))} per GPU-hour)</span></h2>'
        f'<div class="verdict"><ul>{items}</ul><p class="muted">{escape(lines[-1])}</p></div>'
    )


def _next_command(run: RunRecord) -> str:
    """The command the terminal report ends with (report.NextCommand, stored by records.py)."""
    suggested = run.meta.get("next_command")
    if not suggested:
        return ""
    return (
        f'<p class="next">{escape(suggested["why"])}:</p>'
        f'<div class="command"><code>{escape(suggested["command"])}</code></div>'
    )


def _nodes(job: JobReport | None) -> str:
    """The merged view of a multi-node job: each node, the slowest one, the collective wait split."""
    if job is None:
        return ""

    def cell(value: float | None) -> str:
        return f'<td class="num">{escape(format_value(value, "s"))}</td>'

    rows = "".join(
        f"<tr><td>{node.node:.0f}{' (slowest)' if node.node == job.slowest else ''}</td>"
        f"<td>{escape(node.host)}</td><td>{escape(', '.join(f'{r.rank:.0f}' for r in node.ranks))}</td>"
        f"{cell(node.step_time)}{cell(node.own_time)}{cell(node.collective_wait)}</tr>"
        for node in job.nodes
    )
    split = f"<p>Collective wait split: {escape(job.split_note)}</p>"
    if job.intra is not None:
        split = (
            f"<p>Collective wait per step (mean of ranks): intra-node {escape(format_value(job.intra, 's'))}, "
            f"inter-node {escape(format_value(job.inter, 's'))}, transfer {escape(format_value(job.transfer, 's'))}"
            f' <span class="muted">-- {escape(job.split_note)}</span></p>'
        )
    missing = (
        f'<p class="warning">not recorded: node(s) {escape(", ".join(f"{n:.0f}" for n in job.missing))} '
        "(merge their histories with <code>gpulint report RUN --merge FILE</code>)</p>"
        if job.missing
        else ""
    )
    return (
        f'<h2>Across nodes</h2><p class="meta">job <code>{escape(job.id)}</code>: {len(job.nodes)} of '
        f"{job.nodes_expected:.0f} nodes recorded</p><table><tr><th>node</th><th>host</th><th>ranks</th>"
        f"<th>step time</th><th>own work (slowest rank)</th><th>collective wait</th></tr>{rows}</table>"
        f"<p>Slowest node: {escape(job.slowest_note)}</p>"
        + (f'<div class="verdict bad">{escape(job.advice)}</div>' if job.advice else "")
        + f"{split}{missing}"
    )


def _figures(run: RunRecord, baseline: RunRecord | None, history: History | None) -> str:
    if baseline is None:
        if not run.figures:
            return ""
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
        hits = [h for h in lint if h["code"] == r["code"]] if r["code"] else []
        # as the text report: the line this run spends the fix's time on, then the linter's lines
        measured = [f"{escape(Path(r['line']).name)} (measured)"] if r.get("line") else []
        found = "<br>".join(measured + [f"line {h['row']:.0f}: {escape(h['message'])}" for h in hits])
        # the command that answers this fix on the script (report.next_for), as the terminal says it
        then = r.get("next")
        command = (
            f"{escape(then['why'])}:<br><code>{escape(then['command'])}</code>"
            if then
            else "<span class=muted>-</span>"
        )
        rows.append(
            f"<tr><td>{code}</td><td>{escape(r['action'])}</td><td>{escape(r['expected_gain'])}</td>"
            f"<td>{found or '<span class=muted>-</span>'}</td><td>{command}</td></tr>"
        )
    return (
        "<h2>Fixes to try, in order of expected gain</h2><table><tr><th>rule</th><th>fix</th><th>expected gain</th>"
        f"<th>in this script</th><th>next</th></tr>{''.join(rows)}</table>"
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
        return _text(value if value not in (None, "") else "-")

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
def _charts(run: RunRecord, baseline: RunRecord | None) -> str:
    names = list(dict.fromkeys(s.chart for s in run.series))
    wholes = [n for n in names if PART_OF.get(n) not in names]  # a part is drawn inside its whole's chart
    wholes.sort(key=lambda n: CHART_ORDER.index(n) if n in CHART_ORDER else len(CHART_ORDER))

    def parts_of(record: RunRecord | None, name: str) -> list[Series]:
        return [s for s in record.series if PART_OF.get(s.chart) == name] if record else []

    charts = []
    for name in wholes:
        series = run.chart(name)
        if name in HEAT_CHARTS:
            charts.append(_heatmap(name, series))
        else:
            base = baseline.chart(name) if baseline else []
            charts.append(_chart(name, series, base, baseline, parts_of(run, name), parts_of(baseline, name)))
    return "<h2>Over the run</h2>" + "".join(charts) if any(charts) else ""


def nice_ticks(low: float, high: float, count: int = 5, whole: bool = False) -> list[float]:
    """Round tick values covering [low, high]; `whole`: whole numbers only (steps, runs)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = max((high - low) / count, 1e-12)
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


def _points(s: Series) -> list[tuple[float, float]]:
    """The series' points that can be drawn (a stored series may hold NaN or absurd values)."""
    return [
        (x, y)
        for x, y in zip(s.x, s.y, strict=False)
        if math.isfinite(x) and math.isfinite(y) and abs(x) < DRAWABLE and abs(y) < DRAWABLE
    ]


class _Axes:
    """The plot area of a chart of WIDTH x `height`: data coordinates to SVG ones, and the axes
    drawn with round ticks."""

    def __init__(
        self, xs: Iterable[float], x_unit: str, ys: Iterable[float] = (), unit: str = "", height: float = HEIGHT
    ) -> None:
        xs, ys = list(xs), list(ys)
        self.x_unit, self.height = x_unit, height
        self.plot_w, self.plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM
        self.x_ticks = nice_ticks(min(xs), max(xs), 8, whole=x_unit in ("step", "run"))
        if x_unit == "run":  # dots of the first and last run clear of the frame
            self.x_ticks = nice_ticks(min(xs) - 0.5, max(xs) + 0.5, 8, whole=True)
        self.factor, self.unit = 1.0, unit
        self.y_ticks = [0.0, 1.0]
        if ys:
            y_low, y_high = min(0.0, min(ys)), max(ys)
            if unit == "%":
                y_low, y_high = 0.0, max(100.0, y_high)
            self.factor, self.unit = _scale(unit, y_high)
            self.y_ticks = nice_ticks(y_low * self.factor, y_high * self.factor * (1.0 if unit == "%" else 1.05))

    def px(self, x: float) -> float:
        x0, x1 = self.x_ticks[0], self.x_ticks[-1]
        return LEFT + (x - x0) / ((x1 - x0) or 1) * self.plot_w

    def py(self, y: float) -> float:
        y0, y1 = self.y_ticks[0], self.y_ticks[-1]
        return TOP + self.plot_h - (y * self.factor - y0) / ((y1 - y0) or 1) * self.plot_h

    def warmup(self, bottom: float) -> str:
        """Shade the time before the measured window (negative seconds)."""
        x0 = self.x_ticks[0]
        if self.x_unit != "s" or not x0 < 0 < self.x_ticks[-1]:
            return ""
        return (
            f'<rect x="{self.px(x0):.1f}" y="{TOP}" width="{self.px(0) - self.px(x0):.1f}" height="{bottom - TOP:.1f}" '
            f'fill="#f1f1f1"/><text x="{self.px(x0) + 4:.1f}" y="{TOP + 12}">start-up and warm-up</text>'
        )

    def frame(self, bottom: float, y_axis: bool = True) -> str:
        svg = []
        if y_axis:
            for tick in self.y_ticks:
                y = self.py(tick / self.factor)
                svg.append(
                    f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
                    f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick(tick)}</text>'
                )
            svg.append(
                f'<text x="12" y="{(TOP + bottom) / 2:.0f}" transform="rotate(-90 12 {(TOP + bottom) / 2:.0f})" '
                f'text-anchor="middle">{escape(self.unit)}</text>'
                f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom:.1f}" stroke="#999"/>'
            )
        for tick in self.x_ticks:
            x = self.px(tick)
            svg.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}" stroke="#999"/>'
                f'<text x="{x:.1f}" y="{bottom + 17:.1f}" text-anchor="middle">{_tick(tick)}</text>'
            )
        svg.append(
            f'<text x="{WIDTH - RIGHT}" y="{bottom + 31:.1f}" text-anchor="end">{escape(_x_label(self.x_unit))}</text>'
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom:.1f}" y2="{bottom:.1f}" stroke="#999"/>'
        )
        return "".join(svg)


def _chart(
    name: str,
    series: list[Series],
    base: list[Series],
    baseline: RunRecord | None,
    parts: list[Series],
    base_parts: list[Series],
) -> str:
    """Series against steps or time as lines; against runs as dots (independent runs: a line
    between them would read as a trend).  `parts`: series that are a part of the first one
    (data wait of the step time), shaded under it; the baseline's as dashed lines, its dots hollow."""
    colours = {s.name: PALETTE[i % len(PALETTE)] for i, s in enumerate(series + parts)}
    # (series, colour, of the baseline, a shaded part)
    drawn = [(s, colours[s.name], False, False) for s in series]
    drawn += [
        (s, colours.get(s.name, PALETTE[(len(colours) + i) % len(PALETTE)]), True, False) for i, s in enumerate(base)
    ]
    drawn += [(s, colours[s.name], False, True) for s in parts]
    drawn += [(s, colours.get(s.name, PALETTE[-1]), True, True) for s in base_parts]
    points = {id(s): _points(s) for s, _, _, _ in drawn}
    every = [p for ps in points.values() for p in ps]
    if not every or not series:
        return ""
    x_unit = series[0].x_unit
    dots = x_unit == "run"
    axes = _Axes((x for x, _ in every), x_unit, (y for _, y in every), series[0].unit)
    bottom = TOP + axes.plot_h
    svg = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" aria-label="{escape(name)}">',
        axes.warmup(bottom),
        axes.frame(bottom),
    ]
    legend: dict[int, str] = {}
    # What is drawn first lies underneath: the shaded parts, then the baseline, then this run.
    order = sorted(drawn, key=lambda d: (not d[3], not d[2]))
    place = {id(s): i - (len(drawn) - 1) / 2 for i, (s, _, _, _) in enumerate(drawn)}  # of dots at a run
    for s, colour, is_baseline, is_part in order:
        label = f"{s.label} (baseline run {baseline.id})" if is_baseline and baseline else s.label
        title = f"<title>{escape(label)}</title>"
        xy = points[id(s)]
        if dots:
            # Side by side at each run, so that the runs of two arms do not hide each other.
            shift = place[id(s)] * 0.1
            fill = "#fff" if is_baseline else colour
            svg += [
                f'<circle class="run" cx="{axes.px(x + shift):.1f}" cy="{axes.py(y):.1f}" r="3.5" fill="{fill}" '
                f'stroke="{colour}" stroke-width="1.4">{title}</circle>'
                for x, y in xy
            ]
            swatch = f'<i class="dot" style="background: {fill}; border: 1.5px solid {colour}"></i>'
        elif is_part and not is_baseline:
            outline = " ".join(f"{axes.px(x):.1f},{axes.py(y):.1f}" for x, y in xy)
            if xy:
                ground = f"{axes.px(xy[-1][0]):.1f},{axes.py(0):.1f} {axes.px(xy[0][0]):.1f},{axes.py(0):.1f}"
                svg.append(
                    f'<polygon class="part" points="{outline} {ground}" fill="{colour}" fill-opacity="0.35" '
                    f'stroke="{colour}" stroke-width="0.8">{title}</polygon>'
                )
            swatch = f'<i class="area" style="background: {colour}"></i>'
        else:
            coordinates = " ".join(f"{axes.px(x):.1f},{axes.py(y):.1f}" for x, y in xy)
            dash = ' stroke-dasharray="5 3"' if is_baseline else ""
            svg.append(
                f'<polyline class="series" points="{coordinates}" fill="none" stroke="{colour}" '
                f'stroke-width="{1.1 if is_part else 1.6}"{dash}>{title}</polyline>'
            )
            if len(xy) == 1:  # a single point draws no line
                svg.append(f'<circle cx="{axes.px(xy[0][0]):.1f}" cy="{axes.py(xy[0][1]):.1f}" r="3" fill="{colour}"/>')
            swatch = f'<i style="border-top: 3px {"dashed" if is_baseline else "solid"} {colour}"></i>'
        legend[id(s)] = f"<span>{swatch}{escape(label)}</span>"
    svg.append("</svg>")
    keys = "".join(legend[id(s)] for s, _, _, _ in drawn)  # this run's series first
    return f'<figure><figcaption>{escape(name)}</figcaption>{"".join(svg)}<div class="legend">{keys}</div></figure>'


HEAT_STEPS = [0, 25, 50, 75, 100]  # the colour key's cells


def _heat(percent: float) -> str:
    """White (idle) to dark blue (100% busy)."""
    shade = max(0.0, min(1.0, percent / 100))
    return f"rgb({255 - int(223 * shade)},{255 - int(136 * shade)},{255 - int(75 * shade)})"


def _heatmap(name: str, series: list[Series]) -> str:
    """One strip per series (a CPU core), its samples shaded by value from white (idle) to dark
    blue (100% busy): cores busy at once stay apart, where lines at 100% would lie on each other.
    The time axis is the line charts' (same width and ticks), so the strips line up with them."""
    rows = [(s, _points(s)) for s in series]
    rows = [(s, xy) for s, xy in rows if xy]
    if not rows:
        return ""
    xs = [x for _, xy in rows for x, _ in xy]
    axes = _Axes(xs, rows[0][0].x_unit)
    row_h = max(3.0, min(16.0, 320 / len(rows)))
    bottom = TOP + row_h * len(rows)
    height = bottom + BOTTOM + 6
    label_every = 1 if row_h >= 11 else max(1, math.ceil(11 / row_h))
    svg = [
        f'<svg viewBox="0 0 {WIDTH} {height:.0f}" width="100%" role="img" aria-label="{escape(name)}" '
        'shape-rendering="crispEdges">'  # no seams between the cells
    ]
    for row, (s, xy) in enumerate(rows):
        y = TOP + row * row_h
        if row % label_every == 0:
            svg.append(f'<text x="{LEFT - 6}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end">{escape(s.label)}</text>')
        for i, (x, value) in enumerate(xy):
            left = axes.px(x)
            right = axes.px(xy[i + 1][0]) if i + 1 < len(xy) else left + (left - axes.px(xy[i - 1][0]) if i else 2)
            svg.append(
                f'<rect class="cell" x="{left:.1f}" y="{y:.1f}" width="{max(0.5, right - left + 0.3):.1f}" '
                f'height="{row_h - 0.6 if row_h >= 6 else row_h:.1f}" fill="{_heat(value)}"/>'
            )
    svg.append(axes.frame(bottom, y_axis=False))
    starts = axes.x_unit == "s" and min(xs) < 0 < max(xs)
    if starts:  # where the measured steps start
        x = axes.px(0)
        svg.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 4}" y2="{bottom + 4:.1f}" stroke="#d62728"/>')
    key_x = LEFT
    svg.append(f'<text x="{key_x}" y="{bottom + 31:.1f}">busy:</text>')
    for i, step in enumerate(HEAT_STEPS):
        cell_x = key_x + 36 + i * 52
        svg.append(
            f'<rect x="{cell_x}" y="{bottom + 22:.1f}" width="14" height="11" fill="{_heat(step)}" stroke="#bbb"/>'
            f'<text x="{cell_x + 18}" y="{bottom + 31:.1f}">{step}%</text>'
        )
    svg.append("</svg>")
    note = " · red line: the measured steps start" if starts else ""
    return (
        f"<figure><figcaption>{escape(name)}</figcaption>{''.join(svg)}"
        f'<div class="legend muted"><span>one strip per core, darker when busier{note}</span></div></figure>'
    )


def _tick(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _x_label(x_unit: str) -> str:
    return {"s": "seconds from the start of the measured steps", "step": "measured step", "run": "run"}.get(
        x_unit, x_unit
    )
