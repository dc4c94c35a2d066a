"""The project index on a warm run: decided from stat data (run/stamps.py), and solved again only
when a summary changed (run/runner.py `_ProjectViews`).  Every cached answer is compared with a
run without the cache on the same tree."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from gpulint.linter.run import stamps
from tests.helpers import run_cli

HELPERS = textwrap.dedent(
    """\
    import torch


    def log_loss(loss):
        print(loss.item())


    def other(x):
        return x
    """
)
# The training loop of train.py calls helpers.log_loss every step (a cross-module chain: the
# helper's `.item()` is reported with the loop that runs it), or not (`{call}` left empty).
TRAIN = textwrap.dedent(
    """\
    import torch
    from helpers import log_loss, other

    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1000):
        loss = model(torch.randn(8, 4, device="cuda")).sum()
        loss.backward()
        optimizer.step()
        {call}
    """
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "helpers.py").write_text(HELPERS)
    (root / "train.py").write_text(TRAIN.format(call="log_loss(loss)"))
    monkeypatch.chdir(root)
    # Files written a moment ago are hashed on every run (the racy window); these tests write
    # their files, then run at once.
    monkeypatch.setattr(stamps, "RACY_MARGIN_NS", 0)
    return root


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """How many times the run reads a file and solves a project index."""
    from gpulint.linter.run import files, process, project, runner

    counts = {"reads": 0, "solves": 0}
    real_read, real_index = files.read_source, project.RunIndex

    def read_source(*args, **kwargs):
        counts["reads"] += 1
        return real_read(*args, **kwargs)

    class CountedIndex(real_index):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            counts["solves"] += 1
            super().__init__(*args, **kwargs)

    for module in (runner, process, project):
        monkeypatch.setattr(module, "read_source", read_source)
    monkeypatch.setattr(project, "RunIndex", CountedIndex)
    return counts


def findings(capsys, cache: Path | None, *paths: str) -> list[tuple[str, str, int, tuple]]:
    """(file, code, row, related locations) of every finding, with the cache at `cache` or none."""
    where = ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
    code, out, err = run_cli(["check", "--format", "json", "--exit-zero", *where, *paths], capsys)
    assert code == 0, err
    return sorted(
        (
            Path(f["filename"]).name,
            f["code"],
            f["location"]["row"],
            tuple((r["location"]["row"], r["message"]) for r in f.get("related", [])),
        )
        for f in json.loads(out)
    )


def test_a_warm_run_of_an_unchanged_project_reads_no_file_and_solves_nothing(project, counted, capsys, tmp_path):
    cache = tmp_path / "cache"
    first = findings(capsys, cache, "helpers.py")
    assert any(code == "GL201" for _, code, _, _ in first)  # (the chain from train.py's loop)
    assert counted["solves"] == 1
    counted.update(reads=0, solves=0)
    assert findings(capsys, cache, "helpers.py") == first
    assert counted == {"reads": 0, "solves": 0}


def test_a_touched_file_is_hashed_once_and_nothing_is_solved(project, counted, capsys, tmp_path):
    cache = tmp_path / "cache"
    first = findings(capsys, cache, "helpers.py")
    earlier = time.time() - 100  # (a time in the future would be in the racy window)
    os.utime(project / "train.py", (earlier, earlier))
    counted.update(reads=0, solves=0)
    assert findings(capsys, cache, "helpers.py") == first
    assert counted == {"reads": 1, "solves": 0}
    counted.update(reads=0)
    assert findings(capsys, cache, "helpers.py") == first  # (the new stat data was recorded)
    assert counted == {"reads": 0, "solves": 0}


def test_an_edit_with_the_size_and_mtime_restored_is_still_seen(project, capsys, tmp_path):
    """The status-change time, which no tool can set back, tells the edit apart."""
    cache = tmp_path / "cache"
    train = project / "train.py"
    assert any(code == "GL201" for _, code, _, _ in findings(capsys, cache, "helpers.py"))
    before = train.stat()
    edited = TRAIN.format(call="other(loss)   ")  # the same length: log_loss(loss) -> other(loss)
    assert len(edited) == before.st_size
    time.sleep(0.05)  # (past the filesystem clock's tick)
    train.write_text(edited)
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (train.stat().st_size, train.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert findings(capsys, cache, "helpers.py") == findings(capsys, None, "helpers.py")
    assert not any(code == "GL201" for _, code, _, _ in findings(capsys, cache, "helpers.py"))


def test_a_file_changed_within_the_racy_window_is_hashed_again(tmp_path):
    now = time.time_ns()
    old = (10, now - 10 * stamps.RACY_MARGIN_NS, 7, now - 10 * stamps.RACY_MARGIN_NS)
    assert stamps.recordable(old, now) == old
    assert stamps.recordable((10, now - 10, 7, now - 10), now) == stamps.UNKNOWN
    assert stamps.recordable((10, old[1], 7, now - 10), now) == stamps.UNKNOWN  # (changed since: ctime)
    assert stamps.recordable(None, now) == stamps.UNKNOWN


def test_an_edit_that_keeps_every_summary_solves_nothing(project, counted, capsys, tmp_path):
    cache = tmp_path / "cache"
    first = findings(capsys, cache, "helpers.py")
    counted.update(solves=0)
    # A comment at the end: no call, loop or import moves.
    (project / "train.py").write_text(TRAIN.format(call="log_loss(loss)") + "# a comment\n")
    assert findings(capsys, cache, "helpers.py") == first
    assert counted["solves"] == 0


def test_an_edit_of_the_linted_file_that_keeps_its_summary_solves_nothing(project, counted, capsys, tmp_path):
    """The pre-commit case: the file linted is the file edited; its view comes from the entry."""
    cache = tmp_path / "cache"
    findings(capsys, cache, "helpers.py")
    counted.update(solves=0)
    (project / "helpers.py").write_text(HELPERS + "# a comment\n")
    edited = findings(capsys, cache, "helpers.py")
    assert counted["solves"] == 0
    assert edited == findings(capsys, None, "helpers.py")
    assert any(code == "GL201" for _, code, _, _ in edited)


def test_a_view_survives_its_cache_entry(project):
    from gpulint.linter.analysis.project import ModuleView
    from gpulint.linter.run.project import RunIndex

    index = RunIndex([project / "helpers.py", project / "train.py"])
    view = index.view(project / "helpers.py")
    assert view.chains and view.per_step  # (a view with something in every part that matters)
    again = ModuleView.from_data(json.loads(json.dumps(view.to_data())))
    assert again == view and again.digest() == view.digest()
    for bent in ({**view.to_data(), "per_step": [3]}, {**view.to_data(), "extra": 1}, {"chains": []}):
        with pytest.raises(ValueError):
            ModuleView.from_data(bent)


EDITS = [  # train.py's step, in turn: each creates or removes helpers.py's chain, or moves it
    "log_loss(loss)",
    "other(loss)",
    "log_loss(loss)",
    "log_loss(loss)\n    # moved down a line\n",
    "pass",
    "if step % 100 == 0:\n        log_loss(loss)",
    "log_loss(loss)",
]


@pytest.mark.parametrize("linted", [("helpers.py",), (".",)])
def test_each_edit_gives_what_a_run_without_the_cache_gives(project, capsys, tmp_path, linted):
    cache = tmp_path / "cache"
    seen = set()
    for number, call in enumerate(EDITS):
        (project / "train.py").write_text(TRAIN.format(call=call))
        cached = findings(capsys, cache, *linted)
        assert cached == findings(capsys, None, *linted), (number, call)
        seen.add(any(code == "GL201" and name == "helpers.py" for name, code, _, _ in cached))
    assert seen == {True, False}  # (the chain was created and removed)


def test_a_file_written_after_the_index_read_it_is_read_again_next_time(project, capsys, tmp_path, monkeypatch):
    """The index's cache entry records the stat data each file had just before the index read the
    bytes it summarized: a write after that read differs from it, whenever in the run it lands."""
    from gpulint.linter.run import project as run_project

    cache = tmp_path / "cache"
    real_index = run_project.RunIndex

    class WrittenWhileRunning(real_index):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            time.sleep(0.01)  # (past the filesystem clock's tick)
            (project / "train.py").write_text(TRAIN.format(call=""))  # the chain is gone

    monkeypatch.setattr(run_project, "RunIndex", WrittenWhileRunning)
    assert any(code == "GL201" for _, code, _, _ in findings(capsys, cache, "helpers.py"))
    monkeypatch.setattr(run_project, "RunIndex", real_index)
    after = findings(capsys, cache, "helpers.py")
    assert after == findings(capsys, None, "helpers.py")
    assert not any(code == "GL201" for _, code, _, _ in after)
