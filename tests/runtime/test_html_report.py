"""The HTML report: self-contained (nothing loaded, no script), every series drawn, findings
linked to the rule docs; and in real headless Chromium: loads without a console error, the
plots have their points, the screenshot is not blank."""

import math
import re
import time

import pytest

from gpulint.runtime_check import html_report
from gpulint.runtime_check.figures import Figure
from gpulint.runtime_check.history import RunRecord, Series
from tests.runtime.browser import Page, find_chromium, png_pixels

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
    }
    return record


def test_the_page_is_self_contained_and_draws_every_series():
    page = html_report.render(gpu_run(2, 24.0), gpu_run(1, 20.0))
    assert not re.search(r"<script|<link|<img|<iframe|\ssrc=|url\(|@import", page, re.I)
    assert "Content-Security-Policy" in page
    polylines = re.findall(r'<polyline class="series" points="([^"]*)"[^>]*?( stroke-dasharray="5 3")?>', page)
    assert len(polylines) == 2 * 10  # ten line series of this run (four cores as lines), ten of the baseline
    assert sum(1 for _, dashed in polylines if dashed) == 10
    assert all(len(points.split()) >= 120 for points, _ in polylines)
    assert 'href="https://github.com/gpulint/gpulint/blob/main/docs/rules/GL101.md"' in page
    assert "line 48: DataLoader loads batches in the training process" in page
    assert "+20.0%" in page and "worse" in page  # the step time against the baseline's
    assert "<h2>Memory and batch size</h2><ul><li>the batch can grow about 2.5x: measure larger ones" in page


def test_many_cores_are_drawn_as_a_heat_map():
    page = html_report.render(gpu_run(1, 20.0, cores=32))
    assert page.count('class="cell"') == 32 * 120 and "CPU per core" in page


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
        assert len(counts) == 20 and min(counts) >= 120
        boxes = page.evaluate("[...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().height)")
        assert len(boxes) == 6 and min(boxes) > 100  # each chart laid out at a readable size
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
        time.sleep(0.5)
        page.evaluate("1")  # collects the events that came meanwhile
        errors = page.errors()
    assert any("boom" in e for e in errors) and any("example.com" in e for e in errors), errors
