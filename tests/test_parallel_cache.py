"""Worker processes and the result cache change how fast results come, never what they are.

The corpus: the repository's fixtures, generated training scripts (findings, fixes, suppressions, a
syntax error, files the prefilter skips), and a fixed sample of the installed torch package (real
code, present wherever the tests run).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

import gpulint.linter.engine as engine
from gpulint.linter.config import Settings
from gpulint.linter.run import parallel
from gpulint.linter.run.cache import LAYOUT, ResultCache
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from tests.helpers import FIXTURES, run_cli

TRAIN_TEMPLATE = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear({n}, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(load_images({n}), batch_size={n})

for epoch in range(3):
    for step, batch in enumerate(loader):
        loss = model(batch.cuda()).sum()
        loss.backward()
        opt.step()
        print("loss", loss.item())  {suppress}
"""

PLAIN_TEMPLATE = '''\
def add_{n}(a, b):
    """Nothing here for a training linter: the prefilter skips this file."""
    return a + b + {n}
'''

# Real code: a fixed sample of torch's own sources (optimizer, AMP, DataParallel: about 1,500 lines).
TORCH_SAMPLE = ("optim/sgd.py", "amp/grad_scaler.py", "nn/parallel/data_parallel.py")


def _torch_files() -> list[Path]:
    torch = pytest.importorskip("torch")
    base = Path(torch.__file__).parent
    return [base / name for name in TORCH_SAMPLE if (base / name).is_file()]


def _build_corpus(root: Path) -> Path:
    """A tree of ~40 files under `root`."""
    shutil.copytree(FIXTURES, root / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    generated = root / "generated"
    generated.mkdir()
    for n in range(12):
        suppress = "# gpulint: ignore[GL201]" if n % 4 == 0 else ""
        (generated / f"train_{n:02d}.py").write_text(TRAIN_TEMPLATE.format(n=n + 1, suppress=suppress))
        (generated / f"plain_{n:02d}.py").write_text(PLAIN_TEMPLATE.format(n=n))
    (generated / "broken.py").write_text("import torch\nfor x in loader:\n    loss.backward(\n")
    (generated / "not_utf8.py").write_bytes(b"import torch\nname = '\xff\xfe'\n")
    real = root / "torch_sample"
    real.mkdir()
    for path in _torch_files():
        shutil.copyfile(path, real / path.name)
    return root


@pytest.fixture(scope="module")
def shared_corpus(tmp_path_factory) -> Path:
    """A corpus the tests only read (built once: parsing it is most of this module's time)."""
    return _build_corpus(tmp_path_factory.mktemp("shared") / "corpus")


@pytest.fixture()
def corpus(shared_corpus: Path, monkeypatch) -> Path:
    # Display paths are relative to the working directory: keep it fixed so results compare.
    monkeypatch.chdir(shared_corpus.parent)
    return shared_corpus


@pytest.fixture()
def own_corpus(tmp_path: Path, monkeypatch) -> Path:
    """A corpus this test may change."""
    monkeypatch.chdir(tmp_path)
    return _build_corpus(tmp_path / "corpus")


_baselines: dict = {}


def _serial(corpus: Path, options: RunOptions) -> list:
    """The reference: serial, uncached (computed once per corpus and options)."""
    key = (corpus, options)
    if key not in _baselines:
        _baselines[key] = _summary(run([corpus], SETTINGS, options, jobs=1))
    return _baselines[key]


def _summary(result) -> list:
    """Everything a reporter shows, in order: per file its findings (with fixes and edits), the
    problems reported, and the diff and fix count."""
    return [(o.result.path, o.result.findings, sorted(o.errors), o.diff, o.fixed) for o in result.outcomes] + [
        result.errors
    ]


@pytest.fixture()
def count_parses(monkeypatch):
    calls = []
    original = engine.parse

    def counting(source, *budget):
        calls.append(1)
        return original(source, *budget)

    monkeypatch.setattr(engine, "parse", counting)
    return calls


SETTINGS = Settings(select=["ALL"], show_hints=True, unsafe_fixes=True)  # the fix and diff runs apply unsafe fixes too
OPTIONS = RunOptions()


def _cache(tmp_path: Path, settings: Settings = SETTINGS, options: RunOptions = OPTIONS, **kwargs) -> ResultCache:
    return ResultCache.for_run(tmp_path / "cache", settings.fingerprint(), options, **kwargs)


@pytest.mark.parametrize("options", [RunOptions(), RunOptions(diff=True, with_edits=True)])
def test_parallel_and_cached_equal_serial_uncached(corpus, tmp_path, options):
    serial = _serial(corpus, options)
    assert len(serial) > 35 and any(row[1] for row in serial), "the corpus must have findings to compare"
    paths = [row[0] for row in serial[:-1]]
    assert paths == sorted(paths), "outcomes come in the sorted order of the files"
    if not options.diff:  # (the diff run is the costly one: its cold cached run below uses workers too)
        assert _summary(run([corpus], SETTINGS, options, jobs=2)) == serial
    cache = _cache(tmp_path, options=options)
    assert _summary(run([corpus], SETTINGS, options, jobs=2, cache=cache)) == serial  # cold, workers write
    assert _summary(run([corpus], SETTINGS, options, jobs=1, cache=cache)) == serial  # warm
    assert cache.hits > 0


def test_warm_run_parses_nothing_and_starts_no_worker(corpus, tmp_path, count_parses, monkeypatch):
    cache = _cache(tmp_path)
    cold = _summary(run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache))
    assert len(count_parses) > 10
    count_parses.clear()

    def no_pool(*args, **kwargs):
        raise AssertionError("a warm run must not start workers")

    monkeypatch.setattr(parallel, "map_files", no_pool)
    assert _summary(run([corpus], SETTINGS, RunOptions(), jobs=2, cache=cache)) == cold
    assert count_parses == []


def test_edited_file_is_the_only_one_parsed_again(own_corpus, tmp_path, count_parses):
    corpus = own_corpus / "generated"
    cache = _cache(tmp_path)
    run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache)
    target = corpus / "train_03.py"
    target.write_text(target.read_text().replace('print("loss", loss.item())', "pass"))
    count_parses.clear()
    warm = run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache)
    assert len(count_parses) == 1
    assert _summary(warm) == _summary(run([corpus], SETTINGS, RunOptions(), jobs=1))


def test_configuration_and_options_are_part_of_the_key(corpus, tmp_path, count_parses):
    corpus = corpus / "generated"
    run([corpus], SETTINGS, RunOptions(), jobs=1, cache=_cache(tmp_path))
    count_parses.clear()
    other = Settings(select=["GL1"])
    narrowed = run([corpus], other, RunOptions(), jobs=1, cache=_cache(tmp_path, other))
    assert count_parses, "another selection must not reuse the results of ALL"
    assert {f.code for f in narrowed.findings} <= {"GL101", "GL102", "GL103", "GL104", "GL105", "GL000"}
    count_parses.clear()
    run(
        [corpus],
        SETTINGS,
        RunOptions(with_edits=True),
        jobs=1,
        cache=_cache(tmp_path, options=RunOptions(with_edits=True)),
    )
    assert count_parses, "results without edits must not serve a run that needs them"


def _entries(cache: ResultCache) -> list[Path]:
    return [p for p in (cache.directory / LAYOUT).rglob("*") if p.is_file()]


def test_corrupt_entries_are_misses(corpus, tmp_path):
    corpus = corpus / "generated"
    cache = _cache(tmp_path)
    expected = _serial(corpus, RunOptions())
    assert _summary(run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache)) == expected
    entries = sorted(_entries(cache))
    assert len(entries) > 20
    # Each kind of damage on a quarter of the entries: cut short (a run killed mid-write on a
    # filesystem without atomic rename), random bytes, one flipped byte, empty.
    for index, entry in enumerate(entries):
        data = entry.read_bytes()
        damage = (data[: len(data) // 2], os.urandom(len(data)), data[:-1] + bytes([data[-1] ^ 0xFF]), b"")
        entry.write_bytes(damage[index % 4])
    cache = _cache(tmp_path)
    assert _summary(run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache)) == expected
    assert cache.hits == 0


def test_cache_is_bounded(corpus, tmp_path):
    corpus = corpus / "generated"
    cache = _cache(tmp_path)
    run([corpus], SETTINGS, RunOptions(), jobs=1, cache=cache)
    total, entries = cache.size()
    assert len(entries) > 20
    # Age the entries so the eviction order is known: the first half oldest.
    ordered = sorted(entries, key=lambda e: e[2].name)
    for age, (_mtime, _size, path) in enumerate(ordered):
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    small = _cache(tmp_path, max_bytes=total // 2)
    assert small.evict() > 0
    left, kept = small.size()
    assert left <= total // 2
    assert {p for _m, _s, p in kept} == {p for _m, _s, p in ordered[len(ordered) - len(kept) :]}, "oldest go first"


def test_two_runs_sharing_a_cache(corpus, tmp_path):
    corpus = corpus / "generated"
    expected = _serial(corpus, RunOptions())
    results: list = [None, None]

    def one(slot: int) -> None:
        results[slot] = _summary(run([corpus], SETTINGS, RunOptions(), jobs=1, cache=_cache(tmp_path)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected, expected]
    assert not [p for p in (tmp_path / "cache").rglob(".tmp-*")], "no temporary file left behind"
    assert _summary(run([corpus], SETTINGS, RunOptions(), jobs=1, cache=_cache(tmp_path))) == expected


def test_fix_through_workers_writes_the_same_files(own_corpus, tmp_path):
    corpus = own_corpus
    shutil.rmtree(corpus / "torch_sample")  # nothing to fix there; the lint tests cover real code
    twin = tmp_path / "twin"
    shutil.copytree(corpus, twin)
    options = RunOptions(fix=True)
    serial = run([corpus], SETTINGS, options, jobs=1)
    parallel_run = run([twin], SETTINGS, options, jobs=2, cache=_cache(tmp_path, options=options))
    assert sum(o.fixed for o in serial.outcomes) > 0
    assert [o.fixed for o in parallel_run.outcomes] == [o.fixed for o in serial.outcomes]
    for path in sorted(corpus.rglob("*.py")):
        assert (twin / path.relative_to(corpus)).read_bytes() == path.read_bytes(), path
    # The files written are linted afresh next time (their results were not cached under the old
    # content), and the cached results of the others still hold.
    after = run([twin], SETTINGS, RunOptions(), jobs=1)
    cached = _cache(tmp_path, options=options)
    again = run([twin], SETTINGS, options, jobs=1, cache=cached)
    assert [o.result.findings for o in again.outcomes] == [o.result.findings for o in after.outcomes]
    assert sum(o.fixed for o in again.outcomes) == 0


def test_default_jobs_is_the_available_cores():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert parallel.default_jobs() == expected


def test_progress_bar_waits_and_needs_a_terminal(capsys):
    quiet = parallel.DelayedProgress(delay=0.0, enabled=False)
    quiet(1, 10)
    assert not quiet.shown
    patient = parallel.DelayedProgress(delay=3600.0, enabled=True)
    patient(1, 10)
    assert not patient.shown, "a run shorter than the delay shows nothing"
    eager = parallel.DelayedProgress(delay=0.0, enabled=True)
    eager(1, 10)
    assert eager.shown
    eager.close()
    assert not eager.shown


def test_cli_jobs_cache_dir_and_no_cache(corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    target = str(corpus / "generated")
    base = run_cli(["check", target, "--select", "ALL", "--jobs", "1", "--no-cache"], capsys)
    assert base[0] == 1, base
    cache_dir = tmp_path / "cli-cache"
    for _ in range(2):  # cold, then warm
        again = run_cli(["check", target, "--select", "ALL", "--jobs", "2", "--cache-dir", str(cache_dir)], capsys)
        assert again == base
    assert (cache_dir / LAYOUT).is_dir() and (cache_dir / ".gitignore").read_text().strip().endswith("*")
    assert not (tmp_path / ".gpulint_cache").exists(), "--no-cache and --cache-dir write no default cache"
    default = run_cli(["check", target, "--select", "ALL"], capsys)
    assert default == base
    assert (tmp_path / ".gpulint_cache" / LAYOUT).is_dir(), "the default cache lives in the project root (cwd)"
    bad = run_cli(["check", target, "--jobs", "0"], capsys)
    assert bad[0] == 2


HELPERS = """\
import time
import torch


def clip(model):
    for parameter in model.parameters():
        print(parameter.grad.norm().item())


class Meter:
    def update(self, count):
        self.last = time.perf_counter()
"""

STEP_LOOP = """\
import torch
import utils

model = torch.nn.Linear(4, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
meter = utils.Meter()
for step, batch in enumerate(loader):
    loss = model(batch.cuda(non_blocking=True)).sum()
    loss.backward()
    opt.step()
    {clip}
    meter.update(1)
    torch.cuda.synchronize()
"""


@pytest.fixture()
def linted(monkeypatch):
    """The names of the files linted (not taken from the cache), in this process."""
    names = []
    original = engine.Linter.lint_source

    def recording(self, source, path, *args, **kwargs):
        names.append(Path(path).name)
        return original(self, source, path, *args, **kwargs)

    monkeypatch.setattr(engine.Linter, "lint_source", recording)
    return names


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_change_in_one_module_reaches_the_findings_that_depend_on_it(tmp_path, monkeypatch, linted, jobs):
    """The project index with the cache and workers: utils.py's finding depends on how train.py
    calls it, and train.py's on what utils.py does -- each appears and goes with the other file,
    and only the files whose view changed are linted again."""
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    helpers, train = project / "utils.py", project / "train.py"
    helpers.write_text(HELPERS)
    train.write_text(STEP_LOOP.format(clip="utils.clip(model)"))
    for n in range(4):  # enough files for a run with --jobs 2 to start workers
        (project / f"other_{n}.py").write_text(TRAIN_TEMPLATE.format(n=n + 1, suppress=""))
    cache = _cache(tmp_path)

    def findings(use_cache=True) -> set:
        result = run([project], SETTINGS, RunOptions(), jobs=jobs, cache=cache if use_cache else None)
        assert not result.errors
        return {
            (Path(f.path).name, f.code, f.location.row)
            for f in result.findings
            if Path(f.path).name in ("utils.py", "train.py")
        }

    def synchronize() -> tuple:
        row = next(n for n, line in enumerate(train.read_text().splitlines(), 1) if "synchronize" in line)
        return ("train.py", "GL204", row)

    clip_print = ("utils.py", "GL302", 7)
    first = findings()
    assert clip_print in first  # utils.clip runs on every step of train.py
    assert synchronize() not in first  # the meter of utils.py times each step: the sync is needed

    # train.py calls the helper every 100 steps instead: its finding in utils.py (unchanged) goes.
    train.write_text(STEP_LOOP.format(clip="if step % 100 == 0:\n        utils.clip(model)"))
    linted.clear()
    second = findings()
    if jobs == 1:
        assert sorted(linted) == ["train.py", "utils.py"]  # and utils.py, whose view changed; the others are hits
    assert clip_print not in second and second == findings(use_cache=False)

    # utils.py's meter stops reading the clock: the sync in train.py (unchanged) is reported.
    helpers.write_text(HELPERS.replace("time.perf_counter()", "count"))
    third = findings()
    assert synchronize() in third and third == findings(use_cache=False)

    # And back: the cache serves each earlier state again, right.
    helpers.write_text(HELPERS)
    train.write_text(STEP_LOOP.format(clip="utils.clip(model)"))
    assert findings() == first


def test_summarizing_workers_start_for_enough_source_however_many_modules_hold_it(tmp_path, monkeypatch):
    """A pool summarizes the index's modules only when they hold MIN_BYTES_FOR_SUMMARY_WORKERS of
    source: forty small modules are summarized by the process that builds the index (no pool is
    started), one large module in a worker."""
    import concurrent.futures

    small = []
    for n in range(40):
        path = tmp_path / f"plain_{n:02d}.py"
        path.write_text(PLAIN_TEMPLATE.format(n=n))
        small.append((path, None))
    large = tmp_path / "large.py"
    large.write_text("".join(f"def add_{n}(a):\n    return a + {n}\n" for n in range(4_000)))
    assert large.stat().st_size >= parallel.MIN_BYTES_FOR_SUMMARY_WORKERS
    with monkeypatch.context() as patched:
        patched.setattr(concurrent.futures, "ProcessPoolExecutor", lambda *a, **k: pytest.fail("a pool started"))
        assert parallel.summarize_files(small, None, jobs=2) == {}
    found = parallel.summarize_files([(large, None)], None, jobs=2)
    assert found[(large, None)].summary is not None


def test_with_workers_each_module_is_summarized_and_compiled_once_in_a_worker(corpus, tmp_path, monkeypatch):
    """With workers, the project index's summaries are computed in the pool (the process that
    solves the index summarizes none), each module's source is compiled once in all the processes
    together (what the guard measured goes with the summary to the lint's workers), and the results
    are those of a serial run."""
    import hashlib

    from gpulint.linter.analysis import parse_guard
    from gpulint.linter.analysis import project as analysis_project
    from gpulint.linter.run import project as run_project

    serial = _serial(corpus, RunOptions())
    record = tmp_path / "calls.txt"
    summarize, python_tree = analysis_project.summarize, parse_guard.python_tree

    def digest(source: bytes | str) -> str:
        return hashlib.sha256(source.encode() if isinstance(source, str) else source).hexdigest()

    def note(line: str) -> None:
        with record.open("a") as out:  # (one short line per write: whole lines from each process)
            out.write(line + "\n")

    def summarizing(source, *args):
        note(f"summarize {os.getpid()}")
        return summarize(source, *args)

    def compiling(source, *args, **kwargs):
        note(f"compile {digest(source)}")
        return python_tree(source, *args, **kwargs)

    monkeypatch.setattr(analysis_project, "summarize", summarizing)
    monkeypatch.setattr(run_project, "summarize", summarizing)
    monkeypatch.setattr(parse_guard, "python_tree", compiling)
    result = run([corpus], SETTINGS, RunOptions(), jobs=2)
    calls = [line.split() for line in record.read_text().splitlines()]
    summarized = [call[1] for call in calls if call[0] == "summarize"]
    assert len(summarized) == len(list(corpus.rglob("*.py")))
    assert str(os.getpid()) not in summarized, "the index is summarized in the workers"
    compiled = [call[1] for call in calls if call[0] == "compile"]
    # (a source shorter than the guard's threshold is not measured: the lint compiles it for its shapes)
    measured = [
        digest(path.read_bytes()) for path in corpus.rglob("*.py") if path.stat().st_size >= parse_guard.MAX_NESTING
    ]
    assert len(measured) > 10
    assert [compiled.count(source) for source in measured] == [1] * len(measured), "a module compiled twice"
    assert _summary(result) == serial


def test_with_workers_the_index_is_built_in_a_child_while_the_rules_load(corpus, tmp_path, monkeypatch):
    """With workers, the project index is built in a child process -- which summarizes the modules
    in its own pool and hands back the views -- while this process loads the lint's start-up
    (libcst, the rules); the child is gone, and no thread of ours is left, when the lint's workers
    are forked, and the results are those of a serial run."""
    import multiprocessing

    from gpulint.linter.run import runner

    serial = _serial(corpus, RunOptions())
    record = tmp_path / "summaries.txt"
    seen: list[tuple] = []
    summarize_files, pool = parallel.summarize_files, parallel._pool

    def warming(self):
        seen.append(("warm-up", [child.name for child in multiprocessing.active_children()]))

    def summarizing(*args, **kwargs):
        with record.open("a") as out:  # (in the child: this process sees only the file)
            out.write(f"{os.getpid()}\n")
        return summarize_files(*args, **kwargs)

    def forking(*args, **kwargs):
        seen.append(("lint pool", threading.active_count(), multiprocessing.active_children()))
        return pool(*args, **kwargs)

    monkeypatch.setattr(runner._ProjectViews, "warm_up", warming)
    monkeypatch.setattr(parallel, "summarize_files", summarizing)
    monkeypatch.setattr(parallel, "_pool", forking)
    result = run([corpus], SETTINGS, RunOptions(), jobs=2)
    assert seen == [("warm-up", ["gpulint-child"]), ("lint pool", 1, [])]
    summarizers = record.read_text().split()
    assert len(summarizers) == 1 and summarizers[0] != str(os.getpid()), "the child summarizes, once"
    assert _summary(result) == serial


def test_work_in_a_child_comes_back_and_a_failed_child_leaves_it_to_the_caller():
    """`in_child` hands back what the child computed (even None), and None -- do it yourself --
    when the work raised or the child died before answering; `meanwhile` runs here either way."""
    here: list[int] = []
    assert parallel.in_child(lambda: {"views": [1, None]}, meanwhile=lambda: here.append(os.getpid())) == (
        {"views": [1, None]},
    )
    assert parallel.in_child(lambda: None) == (None,)
    assert parallel.in_child(lambda: os.getpid()) != (os.getpid(),)
    assert parallel.in_child(lambda: 1 // 0, meanwhile=lambda: here.append(os.getpid())) is None
    assert parallel.in_child(lambda: os._exit(3)) is None
    assert here == [os.getpid(), os.getpid()]


def test_an_interrupted_parent_stops_its_child_which_unwinds_as_interrupted(tmp_path):
    """A Ctrl-C in the parent while the child of `in_child` works ends the child -- by unwinding
    its work as an interruption, so that it closes what it started (its own pool) -- and reaches
    the caller; no process is left."""
    import multiprocessing
    import time

    started, unwound = tmp_path / "started", tmp_path / "unwound"

    def work():
        try:
            started.write_text("")
            time.sleep(300)
        finally:
            unwound.write_text("closed")

    def interrupted():
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        parallel.in_child(work, meanwhile=interrupted)
    assert unwound.read_text() == "closed"
    assert multiprocessing.active_children() == []


def _collector_pace(path, linter, options, cache, view):
    """What a file's lint sees of the cyclic collector (in a worker: module level, so it pickles)."""
    import gc

    from gpulint.linter.engine import FileResult
    from gpulint.linter.run.outcome import FileOutcome

    return FileOutcome(FileResult(str(path)), errors=[repr(gc.get_threshold())])


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_lint_paces_the_collector_and_puts_it_back(own_corpus, monkeypatch, jobs):
    """The cyclic collector runs at the lint's pace in this process and in its forked workers, and
    at its own pace again once the run is over."""
    import gc

    from gpulint.linter.run import runner

    monkeypatch.setattr(runner, "process_file_cached", _collector_pace)
    monkeypatch.setattr(parallel, "process_file_cached", _collector_pace)
    before = gc.get_threshold()
    assert before != parallel.LINT_COLLECTOR_THRESHOLDS
    result = run([own_corpus], SETTINGS, RunOptions(), jobs=jobs)
    assert gc.get_threshold() == before
    seen = {error for outcome in result.outcomes for error in outcome.errors}
    assert seen == {repr(parallel.LINT_COLLECTOR_THRESHOLDS)}


@pytest.mark.parametrize("initializer", ["_init_worker", "_init_summary_worker"])
def test_a_worker_not_forked_paces_its_own_collector(monkeypatch, initializer):
    """Where workers are started afresh (spawn: macOS, Windows), each sets the pace itself."""
    import gc
    import signal

    monkeypatch.setattr(signal, "signal", lambda *args: None)  # (a worker ignores Ctrl-C; this process must not)
    monkeypatch.setattr(parallel, "_worker", {})
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        args = (SETTINGS, OPTIONS, None) if initializer == "_init_worker" else (None,)
        getattr(parallel, initializer)(*args)
        assert gc.get_threshold() == parallel.LINT_COLLECTOR_THRESHOLDS
    finally:
        gc.set_threshold(*before)


def test_runs_that_overlap_put_the_pace_back_when_the_last_one_ends():
    """Runs in threads of one process overlap (a test, a program embedding gpulint): the first to
    end must not put the pace back under the other, nor the last leave the lint's pace behind."""
    import gc

    before = gc.get_threshold()
    first, second = parallel.collector_paced_for_lint(), parallel.collector_paced_for_lint()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == parallel.LINT_COLLECTOR_THRESHOLDS
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def _waits_for_the_last_chunk(items):
    """A stand-in for the workers' `_work` (forked workers inherit it): the first file's chunk
    waits until the last file's has run, and says whether it did."""
    (path, _view), *_ = items
    flag = path.parent / "last-done"
    if path.name == "f0.py":
        for _ in range(400):  # (20 s at most: only a scheduler that waits on this chunk gets there)
            if flag.exists():
                return ["first chunk saw the last one done"]
            threading.Event().wait(0.05)
        return ["first chunk timed out"]
    if path.name == "f5.py":
        flag.touch()
    return [path.name]


@pytest.mark.skipif(parallel._context().get_start_method() != "fork", reason="workers inherit the stand-in by fork")
def test_a_slow_file_does_not_hold_back_the_files_after_it(tmp_path, monkeypatch):
    # Outcomes come back in order, but the other worker goes on with the files after a slow one.
    monkeypatch.setattr(parallel, "_work", _waits_for_the_last_chunk)
    paths = [(tmp_path / f"f{i}.py", None) for i in range(6)]
    outcomes = list(parallel.map_files(paths, Settings(), RunOptions(), None, jobs=2))
    assert outcomes == ["first chunk saw the last one done", "f1.py", "f2.py", "f3.py", "f4.py", "f5.py"]
