"""The HTML report: self-contained (nothing loaded, no script), every series drawn (data wait
shaded under the step time, cores as heat strips, runs as dots), findings linked to the rule
docs, the next command as the terminal prints it; in real headless Chromium: loads without a
console error, the plots have their points, the screenshot is not blank.  And a history someone
else wrote: hostile text in every stored field shows as text and makes the browser fetch or
navigate nothing; a stored number that is not one is refused."""

import html
import io
import math
import re
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpulint.runtime_check import html_report, record, records, report
from gpulint.runtime_check.compare import SPEEDUP
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import History, RunRecord, Series
from gpulint.runtime_check.measure import Command, RunConfig
from gpulint.runtime_check.verify import Arm, VerifyResult, compare
from tests.runtime.browser import Page, find_chromium, png_pixels
from tests.runtime.helpers import measured_run
from tests.runtime.test_report import profile_of
from tests.runtime.test_runs import gpulint

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (apt-get install chromium, or set CHROMIUM)"
)


def gpu_run(run_id: int, step_ms: float, cores: int = 4) -> RunRecord:
    """A recorded profile of a GPU run, as figures.profile_record makes them."""
    steps = [float(i) for i in range(1, 201)]
    times = [-8 + 0.25 * i for i in range(120)]
    record = RunRecord(
        "profile",
        "gpulint profile -- python train.py --epochs 1",
        '["profile", "train.py"]',
        "stopped",
        time.time(),
        "train.py",
        "abc",
        "input-bound (high)",
        30.0,
        "a" * 40,
        False,
        "trainer",
        {
            "cpu": "Xeon",
            "cores": cores,
            "gpus": ["NVIDIA H100"],
            "driver": "550.54",
            "python": "3.11.9",
            "frameworks": {"torch": "2.4.0"},
            "gpulint": "0.1.0",
        },
        id=run_id,
    )
    record.figures = [
        Figure("measured steps", 200, "count"),
        Figure("step time (mean)", step_ms / 1000, "s", better="lower", noise=step_ms / 1000 * 0.02),
        Figure("data wait (share of step time)", 0.4, "share", better="lower", noise=0.02),
        Figure("GPU utilization (mean)", 55.0, "%", better="higher"),
    ]
    record.series = [
        Series(
            "step_time",
            "step time",
            "step time",
            "s",
            "step",
            steps,
            [step_ms / 1000 * (1 + 0.1 * math.sin(i / 7)) for i in range(200)],
        ),
        Series(
            "data_wait", "data wait per step", "data wait per step", "s", "step", steps, [0.4 * step_ms / 1000] * 200
        ),
        Series(
            "gpu0_util",
            "GPU 0 (NVIDIA H100)",
            "GPU utilization",
            "%",
            "s",
            times,
            [50 + 45 * math.sin(t) for t in times],
        ),
        Series("gpu0_memory", "GPU 0 (NVIDIA H100)", "GPU memory", "GiB", "s", times, [30.0 + t / 10 for t in times]),
        Series("cpu_main", "main process", "CPU of the run", "cores", "s", times, [1.0] * 120),
        Series("cpu_workers", "loader workers", "CPU of the run", "cores", "s", times, [2.5] * 120),
    ] + [
        Series(f"cpu_core{i}", f"core {i}", "CPU per core", "%", "s", times, [(20 * i + t) % 100 for t in times])
        for i in range(cores)
    ]
    record.meta = {
        "verdict": {
            "headline": "input-bound (high)",
            "advice": "fix the input pipeline first",
            "reasons": ["40% of step time waits for input"],
            "warnings": [],
            "recommendations": [
                {
                    "code": "GL101",
                    "action": "load batches in worker processes (num_workers)",
                    "expected_gain": "up to 1.7x",
                }
            ],
        },
        "lint": [
            {"code": "GL101", "row": 48, "message": "DataLoader loads batches in the training process", "fixable": True}
        ],
        "syncs": [{"where": "train.py:60", "per_step": 1.0, "source": "loss.item()", "rule": "GL201"}],
        "memory_advice": ["the batch can grow about 2.5x: measure larger ones with verify --param batch_size=<b>"],
        "next_command": {
            "why": "Measure the first fix before keeping it",
            "command": "gpulint verify train.py --select GL101 -- --epochs 1",
        },
        "cost": {"kind": "waste", "share": 0.4, "step_seconds": step_ms / 1000, "gpus": 8, "steps_per_epoch": 1000},
    }
    return record


def test_the_page_is_self_contained_and_draws_every_series():
    page = html_report.render(gpu_run(2, 24.0), gpu_run(1, 20.0))
    assert not re.search(r"<script|<link|<img|<iframe|<form|<base|\ssrc=|url\(|@import", page, re.I)
    assert f'<meta http-equiv="Content-Security-Policy" content="{html_report.CSP}">' in page
    polylines = re.findall(r'<polyline class="series" points="([^"]*)"[^>]*?( stroke-dasharray="5 3")?>', page)
    # Five line series of each run (step time, GPU utilization and memory, CPU of the main process
    # and of the workers), and the baseline's data wait as a dashed line under its step time.
    assert len(polylines) == 5 + 6
    assert sum(1 for _, dashed in polylines if dashed) == 6
    assert all(len(points.split()) >= 120 for points, _ in polylines)
    assert page.count('<polygon class="part"') == 1  # this run's data wait, shaded
    assert page.count('class="cell"') == 4 * 120  # CPU per core
    assert 'href="https://github.com/gpulint/gpulint/blob/main/docs/rules/GL101.md"' in page
    assert "line 48: DataLoader loads batches in the training process" in page
    assert "+20.0%" in page and "worse" in page  # the step time against the baseline's
    assert "<h2>Memory and batch size</h2><ul><li>the batch can grow about 2.5x: measure larger ones" in page


def figure_of(page: str, caption: str) -> str:
    """The <figure> with this caption."""
    return re.search(rf"<figure><figcaption>{re.escape(caption)}</figcaption>.*?</figure>", page).group()


def captions(page: str) -> list[str]:
    return re.findall(r"<figcaption>(.*?)</figcaption>", page)


def test_step_time_and_its_data_wait_are_one_chart_the_wait_shaded_under_the_step():
    run = gpu_run(1, 20.0)
    page = html_report.render(run)
    assert captions(page) == ["step time", "GPU utilization", "GPU memory", "CPU of the run", "CPU per core"]
    chart = figure_of(page, "step time")
    line = re.search(r'<polyline class="series" points="([^"]*)"', chart).group(1).split()
    area = re.search(r'<polygon class="part" points="([^"]*)"', chart).group(1).split()
    assert len(line) == 200 and len(area) == 200 + 2  # the wait's 200 points, closed along the axis
    y = lambda point: float(point.split(",")[1])  # noqa: E731  (SVG y grows downwards)
    axis = y(area[-1])
    assert y(area[-2]) == axis and all(y(a) > y(s) for a, s in zip(area, line, strict=False))
    # The shaded height is the wait: 40% of a step of 20 ms at the first point.
    first_step = run.series[0].y[0]
    assert (axis - y(area[0])) / (axis - y(line[0])) == pytest.approx(0.008 / first_step, abs=0.01)
    assert "data wait per step</span>" in chart  # in the legend, as a shaded swatch
    with_baseline = html_report.render(run, gpu_run(0, 18.0))
    assert "data wait per step (baseline run 0)" in figure_of(with_baseline, "step time")


def test_cores_are_drawn_as_heat_strips_whatever_their_number():
    for cores in (2, 4, 32):
        page = html_report.render(gpu_run(1, 20.0, cores=cores))
        chart = figure_of(page, "CPU per core")
        assert chart.count('class="cell"') == cores * 120 and "<polyline" not in chart
        assert "core 0</text>" in chart and "busy:" in chart
        # One strip per core, its cells on the time axis of the line charts: the first and the
        # last sample where the GPU utilization line (sampled at the same times) has them.
        cells = re.findall(r'<rect class="cell" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', chart)
        rows = sorted({float(y) for _, y, _ in cells})
        assert len(rows) == cores
        first_row = [float(x) for x, y, _ in cells if float(y) == rows[0]]
        gpu = re.search(r'class="series" points="([^"]*)"', figure_of(page, "GPU utilization")).group(1).split()
        assert first_row[0] == float(gpu[0].split(",")[0]) and first_row[-1] == float(gpu[-1].split(",")[0])
        busy = re.findall(r'fill="(rgb\(\d+,\d+,\d+\))"', chart)
        assert len(set(busy)) > 10  # shades, not one colour


def verify_of(original_ms: list[float], fixed_ms: list[float]) -> RunRecord:
    """A recorded verify (records.verify_record) of runs with these mean step times."""
    original = Arm("original", [measured_run([t / 1000] * 20) for t in original_ms])
    fixed = Arm("fixed", [measured_run([t / 1000] * 20) for t in fixed_ms])
    result = VerifyResult(
        "train.py",
        ["GL101"],
        1,
        "--- train.py\n+++ train.py\n",
        original,
        fixed,
        ["A", "B"] * len(original_ms),
        compare(original.run_times, fixed.run_times),
    )
    command = Command(sys.executable, [], ["train.py", "--lr", "0.1 x"])
    return records.verify_record(result, command, time.time(), 3.0)


def test_independent_runs_are_dots_not_a_line():
    run = verify_of([100, 102, 99, 101, 103], [60, 61, 59, 62, 60])
    run.id = 7
    chart = figure_of(html_report.render(run), "step time per run")
    assert "<polyline" not in chart and "<polygon" not in chart
    dots = re.findall(r'<circle class="run" cx="([\d.]+)" cy="([\d.]+)" r="[\d.]+" fill="([^"]+)"', chart)
    assert len(dots) == 10 and len({fill for _, _, fill in dots}) == 2
    # The arms' dots of one run sit side by side, not on each other.
    assert len({x for x, _, _ in dots}) == 10
    baseline = verify_of([100, 101, 100], [99, 100, 101])
    baseline.id = 6
    beside = figure_of(html_report.render(run, baseline), "step time per run")
    hollow = re.findall(r'<circle class="run" [^>]* fill="#fff"', beside)
    assert len(hollow) == 6 and "original (baseline run 6)" in beside and "<polyline" not in beside


def terminal_lines(print_report, *args) -> list[str]:
    stream = io.StringIO()
    print_report(report.Output(stream, color=False), *args)
    return stream.getvalue().splitlines()


def test_the_page_shows_the_command_the_terminal_report_ends_with():
    profile = profile_of(Command(sys.executable, [], ["train.py", "--lr", "0.1 x"]))
    page = html_report.render(records.profile_record(profile, RunConfig(), time.time()))
    said = report.profile_next(profile)
    assert said.line in terminal_lines(report.print_profile, profile)
    assert said.command == "gpulint verify train.py --select GL101 -- --lr '0.1 x'"
    assert (
        f'<p class="next">Measure the first fix before keeping it:</p><div class="command"><code>'
        f"{html.escape(said.command)}</code></div></div>" in page
    )  # at the end of the verdict

    verified = verify_of([100, 102, 99, 101, 103], [60, 61, 59, 62, 60])
    page = html_report.render(verified)
    assert "gpulint verify train.py --select GL101 --write -- --lr &#x27;0.1 x&#x27;</code>" in page
    assert "the script is unchanged; to apply the fix:</p>" in page
    # A run recorded before the command was stored, and a run with nothing to do next, show none.
    verified.meta.pop("next_command")
    assert 'class="next"' not in html_report.render(verified)
    assert verify_of([100, 101, 100], [99, 100, 101]).meta["next_command"] is None


def test_ticks_are_round():
    assert html_report.nice_ticks(0, 97) == [0, 20, 40, 60, 80, 100]
    assert html_report.nice_ticks(1, 20, 8, whole=True) == [0, 3, 6, 9, 12, 15, 18, 21]


@needs_chromium
def test_the_report_in_chromium_loads_cleanly_with_plots_and_is_not_blank(tmp_path):
    path = tmp_path / "report.html"
    html_report.write(path, gpu_run(2, 24.0), gpu_run(1, 20.0))
    with Page(CHROMIUM) as page:
        page.load(path.as_uri())
        assert page.errors() == []
        counts = page.evaluate("[...document.querySelectorAll('polyline.series')].map(p => p.points.numberOfItems)")
        assert len(counts) == 11 and min(counts) >= 120
        boxes = page.evaluate("[...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().height)")
        assert len(boxes) == 5 and min(boxes) > 60  # each chart laid out at a readable size
        assert page.evaluate("document.body.scrollWidth") <= 1000  # nothing wider than the window
        shot = page.call(
            "Page.captureScreenshot",
            session=True,
            format="png",
            clip={"x": 0, "y": 0, "width": 1000, "height": 1800, "scale": 0.25},
        )
    import base64

    width, height, rows = png_pixels(base64.b64decode(shot["data"]))
    pixels = [row[i : i + 3] for row in rows for i in range(0, len(row), 3)]
    background = max(set(pixels), key=pixels.count)
    assert width == 250 and height == 450
    assert len(set(pixels)) > 50 and sum(p != background for p in pixels) > 0.1 * len(pixels)


@needs_chromium
def test_the_browser_check_sees_errors_and_blocked_loads(tmp_path):
    path = tmp_path / "broken.html"
    path.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'\"></head><body><script>console.error('boom')</script>"
        '<img src="https://example.com/x.png"></body></html>'
    )
    with Page(CHROMIUM) as page:
        page.load(path.as_uri())
        deadline = time.monotonic() + 60
        while True:
            page.evaluate("1")  # collects the events that came meanwhile
            errors = page.errors()
            if any("boom" in e for e in errors) and any("example.com" in e for e in errors):
                break
            assert time.monotonic() < deadline, errors
            time.sleep(0.1)


# -- a history someone else wrote (a CI cache, a shared folder) ---------------------------------
def hostile(field: str, url: str, refresh: bool = True) -> str:
    """Markup that loads, navigates or submits to `url` if it reaches the page as markup (a meta
    refresh navigates even under the report's Content-Security-Policy); it starts with the name
    of the field it is planted in."""
    to = f"{url}/{field}"
    return (
        f"{field} </title></style></textarea>\"'>"
        + (f'<meta http-equiv="refresh" content="0;url={to}/refresh">' if refresh else "")
        + f'<base href="{to}/base/"><img src="{to}/img"><link rel="stylesheet" href="{to}/css">'
        f'<iframe src="{to}/frame"></iframe><form action="{to}/form"><button>go</button></form>'
        f'<svg><image href="{to}/svg"/></svg><a href="{to}/link">x</a><script>location = "{to}/js"</script><!--'
    )


def hostile_history(db, url: str) -> tuple[dict[str, str], set[str]]:
    """Record run 1 (a verify) and run 2 (a profile) with hostile text in every stored text field,
    as History.record stores them.  Numbers are numbers here (one that is not is refused: see
    test_a_stored_number_that_is_not_a_number_is_refused).  Returns {field: planted text} and
    the fields some page shows (the others are stored but no page shows them)."""
    planted: dict[str, str] = {}

    def h(field: str) -> str:
        planted[field] = hostile(field, url)
        return planted[field]

    times = [-4 + 0.25 * i for i in range(60)]
    verify = RunRecord(
        "verify",
        h("1.command"),
        h("1.command_key"),
        h("1.status"),
        time.time(),
        h("1.script"),
        h("1.script_sha256"),
        h("1.verdict"),
        3.0,
        h("1.git_commit"),
        False,
        h("1.host"),
        {"cpu": h("1.environment.cpu"), "gpus": [h("1.environment.gpus[0]")]},
        [Figure(SPEEDUP, 1.5, "x", h("1.figures[0].note"), h("1.figures[0].better"))],
        [Series(h("1.series[0].name"), h("1.series[0].label"), h("1.series[0].chart"), "s", "run", [1, 2], [0.1, 0.2])],
        {
            "warnings": [h("1.meta.warnings[0]")],
            "next_command": {"why": h("1.meta.next_command.why"), "command": h("1.meta.next_command.command")},
            "diff": h("1.meta.diff"),
            "codes": [h("1.meta.codes[0]")],
        },
    )
    code = h("2.meta.verdict.recommendations[0].code")
    profile = RunRecord(
        h("2.kind"),
        h("2.command"),
        h("2.command_key"),
        h("2.status"),
        time.time(),
        h("2.script"),
        h("2.script_sha256"),
        h("2.verdict"),
        31.0,
        h("2.git_commit"),
        True,
        h("2.host"),
        {
            **{key: h(f"2.environment.{key}") for key in ("cpu", "cores", "driver", "python", "platform", "gpulint")},
            "gpus": [h("2.environment.gpus[0]")],
            "frameworks": {h("2.environment.frameworks key"): h("2.environment.frameworks value")},
            h("2.environment key"): h("2.environment value"),
        },
        [Figure(h("2.figures[0].name"), 0.024, "s", h("2.figures[0].note"), h("2.figures[0].better"), 0.001)],
        [
            Series(h("2.series[0].name"), h("2.series[0].label"), "step time", "s", "step", [1, 2, 3], [0.02] * 3),
            Series(
                h("2.series[1].name"), h("2.series[1].label"), "data wait per step", "s", "step", [1, 2, 3], [0.01] * 3
            ),
            Series(
                h("2.series[2].name"),
                h("2.series[2].label"),
                h("2.series[2].chart"),
                h("2.series[2].unit"),
                h("2.series[2].x_unit"),
                [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                [math.nan, math.inf, -math.inf, 1e308, 1.0, 2.0],  # left out, but for the last two
            ),
            Series(h("2.series[3].name"), h("2.series[3].label"), "CPU per core", "%", "s", times, [50.0] * 60),
        ],
        {
            "verdict": {
                "headline": h("2.meta.verdict.headline"),
                "advice": h("2.meta.verdict.advice"),
                "reasons": [h("2.meta.verdict.reasons[0]")],
                "warnings": [h("2.meta.verdict.warnings[0]")],
                "recommendations": [
                    {
                        "code": code,
                        "action": h("2.meta.verdict.recommendations[0].action"),
                        "expected_gain": h("2.meta.verdict.recommendations[0].expected_gain"),
                    }
                ],
            },
            "next_command": {"why": h("2.meta.next_command.why"), "command": h("2.meta.next_command.command")},
            "memory_advice": [h("2.meta.memory_advice[0]")],
            "lint": [{"code": code, "row": 48, "message": h("2.meta.lint[0].message"), "fixable": h("2.meta.lint.f")}],
            "syncs": [
                {
                    "where": h("2.meta.syncs[0].where"),
                    "per_step": 1.5,
                    "source": h("2.meta.syncs[0].source"),
                    "rule": h("2.meta.syncs[0].rule"),
                }
            ],
            "warnings": [h("2.meta.warnings[0]")],
            "diff": h("2.meta.diff"),
            h("2.meta key"): h("2.meta value"),
        },
    )
    with History.open(db) as history:
        history.record(verify)
        history.record(profile)
    never_shown = {"command_key", "status", "script_sha256", "better", ".name", "environment key", "environment value"}
    never_shown |= {"meta.codes", "meta.lint.f", "meta key", "meta value", "2.verdict", "2.meta.warnings"}
    return planted, {field for field in planted if not any(part in field for part in never_shown)}


@pytest.fixture
def listener():
    """A web server on the loopback that records every request made to it: (its URL, the paths asked)."""
    asked: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(204)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    # (shutdown() waits for the serving loop's next look: every 0.5 s by default)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


# The elements the report writes; a planted value that became markup would add others.
REPORT_ELEMENTS = {"html", "head", "meta", "title", "style", "body", "main", "footer", "h1", "h2", "div", "p", "ul"}
REPORT_ELEMENTS |= {"li", "strong", "code", "pre", "table", "tbody", "tr", "th", "td", "span", "a", "br", "i"}
REPORT_ELEMENTS |= {"figure", "figcaption", "svg", "line", "text", "rect", "polyline", "polygon", "circle"}
SETTLE_S = 1.0  # a meta refresh of 0 s, a load or a submit has happened by then


def load_and_settle(page: Page, path) -> dict:
    """Load a file, give anything it would start time to happen, then read the page."""
    page.load(path.as_uri())
    time.sleep(SETTLE_S)
    return page.evaluate(
        "({url: location.href, text: document.documentElement.textContent,"
        " tags: [...new Set([...document.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))],"
        " metas: [...document.querySelectorAll('meta')].map(m => m.outerHTML),"
        " links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))})"
    )


@pytest.mark.slow
@needs_chromium
def test_hostile_text_in_every_stored_field_is_shown_as_text_and_nothing_is_fetched(tmp_path, listener):
    url, asked = listener
    planted, shown = hostile_history(tmp_path / "history.db", url)
    pages = {"2-against-1.html": ("2", "1"), "1.html": ("1", None), "2.html": ("2", None)}
    for name, (ref, baseline) in pages.items():  # as `gpulint report REF [--baseline B] --html NAME`
        options = record.HistoryOptions(tmp_path / "history.db")
        assert record.report_command(report.Output(io.StringIO()), options, ref, tmp_path / name, baseline) == 0
    text = ""
    with Page(CHROMIUM) as page:
        for name in pages:
            seen = load_and_settle(page, tmp_path / name)
            assert seen["url"] == (tmp_path / name).as_uri()  # not navigated away
            assert set(seen["tags"]) <= REPORT_ELEMENTS, set(seen["tags"]) - REPORT_ELEMENTS
            assert len(seen["metas"]) == 4 and not any("refresh" in m for m in seen["metas"])
            assert all(href.startswith("https://github.com/gpulint/gpulint/") for href in seen["links"])
            text += seen["text"]
        page.evaluate("1")  # collects the console's events
        assert page.errors() == []  # nothing was even tried and blocked by the policy
    assert asked == []
    missing = [f for f in sorted(shown) if planted[f][: 10 if f.endswith("git_commit") else None] not in text]
    assert missing == []


def planted_page(path, markup: str) -> None:
    path.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{html_report.CSP}">'
        f"</head><body>{markup}</body></html>"
    )


@needs_chromium
def test_the_policy_stops_loads_forms_and_base_but_not_a_meta_refresh(tmp_path, listener):
    """What the report's policy does with markup that got in, and that the check above sees a
    planted refresh: the policy alone is not enough, so every stored value is escaped."""
    url, asked = listener
    planted_page(tmp_path / "loads.html", hostile("loads", url, refresh=False))
    planted_page(tmp_path / "refresh.html", hostile("refresh", url))
    with Page(CHROMIUM) as page:
        seen = load_and_settle(page, tmp_path / "loads.html")
        page.evaluate("document.forms[0].submit()")  # a script of the page could not run: as if it did
        time.sleep(SETTLE_S)
        assert page.evaluate("[location.href, document.baseURI]") == [(tmp_path / "loads.html").as_uri()] * 2
        assert "img" in seen["tags"] and "form" in seen["tags"]  # the markup is there, and blocked
        assert asked == []
        page.load((tmp_path / "refresh.html").as_uri())
        deadline = time.monotonic() + 60  # (only a refresh that never comes waits this long)
        while not asked and time.monotonic() < deadline:
            time.sleep(0.1)
    assert asked == ["/refresh/refresh"]


def plant(db, sql: str, value) -> None:
    connection = sqlite3.connect(db)
    with connection:
        connection.execute(sql, (value,))
    connection.close()


# Values inside the run's JSON meta reach the report, which refuses them by field; a table column of
# the wrong type is refused earlier, by the history's reader, naming the column.
NOT_NUMBERS = [
    ("meta.lint[0].row", "UPDATE runs SET meta = json_set(meta, '$.lint[0].row', ?)", "a number"),
    ("meta.syncs[0].per_step", "UPDATE runs SET meta = json_set(meta, '$.syncs[0].per_step', ?)", "a number"),
    ("meta.lint", "UPDATE runs SET meta = json_set(meta, '$.lint', ?)", "a list"),
    ("meta.cost.share", "UPDATE runs SET meta = json_set(meta, '$.cost.share', ?)", "a number"),
]
NOT_NUMBER_COLUMNS = [
    ("figures[1].value", "UPDATE figures SET value = ? WHERE position = 1", "figure value or noise"),
    ("figures[1].noise", "UPDATE figures SET noise = ? WHERE position = 1", "figure value or noise"),
    ("started_at", "UPDATE runs SET started_at = ?", "started_at"),
    ("wall_seconds", "UPDATE runs SET wall_seconds = ?", "wall_seconds"),
]


def planted_report(tmp_path, sql: str, value) -> tuple[int, Path]:
    db, page = tmp_path / "history.db", tmp_path / "report.html"
    with History.open(db) as history:
        history.record(gpu_run(None, 20.0))
    plant(db, sql, value)
    return record.report_command(report.Output(io.StringIO()), record.HistoryOptions(db), "1", page), page


@pytest.mark.parametrize(("field", "sql", "wanted"), NOT_NUMBERS, ids=[f for f, _, _ in NOT_NUMBERS])
def test_a_stored_number_that_is_not_a_number_is_refused(tmp_path, capsys, field, sql, wanted):
    code, page = planted_report(tmp_path, sql, hostile(field, "http://127.0.0.1:9"))
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"gpulint: error: cannot draw run 1: {field} is '{field} </title>") and error.endswith(
        f"..., not {wanted}\n"
    )
    assert not page.exists()


@pytest.mark.parametrize(("field", "sql", "column"), NOT_NUMBER_COLUMNS, ids=[f for f, _, _ in NOT_NUMBER_COLUMNS])
def test_a_stored_column_of_the_wrong_type_is_refused_by_the_history(tmp_path, capsys, field, sql, column):
    code, page = planted_report(tmp_path, sql, hostile(field, "http://127.0.0.1:9"))
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("gpulint: error: cannot read ") and error.endswith(
        f"it is damaged or not a gpulint run history ({column} holds str)\n"
    )
    assert "<" not in error and not page.exists()


def test_a_planted_lint_row_is_refused_by_the_command_and_no_page_is_written(tmp_path):
    """The reported attack: `report RUN --html` wrote meta.lint[].row as it was stored."""
    db, page = tmp_path / "history.db", tmp_path / "report.html"
    with History.open(db) as history:
        history.record(gpu_run(None, 20.0))
    row = '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/">'
    plant(db, "UPDATE runs SET meta = json_set(meta, '$.lint[0].row', ?)", row)
    done = gpulint(tmp_path, "report", "1", "--html", str(page))
    assert (done.returncode, done.stdout) == (2, "")
    assert f"cannot draw run 1: meta.lint[0].row is {repr(row)[:60]}..., not a number" in done.stderr
    assert not page.exists()


def test_a_start_time_no_calendar_holds_is_refused():
    run = gpu_run(3, 20.0)
    run.started_at = 1e300
    with pytest.raises(html_report.ReportError, match=r"^cannot draw run 3: started_at is 1e\+300, not a time$"):
        html_report.render(run)
    with pytest.raises(html_report.ReportError, match=r"^cannot draw baseline 3: started_at is 1e\+300"):
        html_report.render(gpu_run(4, 20.0), run)


def test_points_that_cannot_be_drawn_are_left_out():
    run = gpu_run(1, 20.0)
    run.series = [
        Series("s", "s", "step time", "s", "step", [1, 2, 3, 4, 5, 6], [math.nan, math.inf, 1e308, -1e300, 0.02, 0.03])
    ]
    points = re.search(r'<polyline class="series" points="([^"]*)"', html_report.render(run)).group(1)
    assert len(points.split()) == 2


@pytest.mark.parametrize("headline", ["host-bound (checkpoint writes)", "straggler (rank 1)", "communication-bound"])
def test_every_verdict_that_says_fix_the_code_is_drawn_as_one(headline):
    run = gpu_run(1, 20.0)
    run.meta["verdict"]["headline"] = headline
    assert '<div class="verdict bad">' in html_report.render(run)
    run.meta["verdict"]["headline"] = "compute-bound"
    assert '<div class="verdict bad">' not in html_report.render(run)


def test_the_page_shows_the_measured_line_of_a_fix_as_the_text_does():
    """The text said "train.py:42 (measured)" where the page said "-"."""
    profile = profile_of(Command(sys.executable, [], ["train.py"]), codes=())
    profile.verdict.recommendations[0].line = str(Path("project", "train.py")) + ":42"
    assert any("train.py:42 (measured)" in line for line in terminal_lines(report.print_profile, profile))
    page = html_report.render(records.profile_record(profile, RunConfig(), time.time()))
    fixes = page[page.index("<h2>Fixes to try") :]
    first = fixes[: fixes.index("</tr>", fixes.index("</tr>") + 5)]
    assert "train.py:42 (measured)" in first and "project" not in first
