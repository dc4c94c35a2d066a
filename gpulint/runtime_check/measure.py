"""Run the user's command once under the bootstrap and turn what it recorded into figures.

The parent starts the child in its own session (so a hang is ended with its loader workers), samples
CPU and GPU in threads while it runs, and reads the child's JSON at the end.  Everything lives in a
temporary folder that is removed whatever happens.

The training processes never outlive gpulint: a run that ends early (a timeout, Ctrl-C, or SIGTERM,
SIGHUP or SIGQUIT while a command runs under `stop_on_signals`) ends the child's whole tree
(`_kill_tree`), and a gpulint killed outright (SIGKILL) is noticed by the child itself, which then
ends its own process group (bootstrap.watch_parent).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gpulint.runtime_check import cpu as cpu_mod
from gpulint.runtime_check import nvml, stats
from gpulint.runtime_check.launchers import Launch, LaunchError, parse_launch

BOOTSTRAP = str(Path(__file__).with_name("bootstrap.py"))
# Interpreter options that take a value (`python -X dev -W error train.py`).
_OPTIONS_WITH_VALUE = {"-X", "-W", "--check-hash-based-pycs"}
# After a stop, a script gets this long to unwind before it is killed.
EXIT_GRACE_S = 15.0
# Ending the tree: this long after SIGTERM before SIGKILL, and after SIGKILL before giving up.
KILL_WAIT_S = 3.0
# The signals that stop gpulint while a command runs (stop_on_signals); SIGINT is Ctrl-C.
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
POLL_S = 0.2  # how often the parent looks at the child (exit, result file, progress)
EXIT_TIMEOUT = 124  # as coreutils `timeout`
EXIT_NO_STEPS = 3


class CommandError(Exception):
    """The command cannot be profiled: one line for the user."""


class Stopped(KeyboardInterrupt):
    """A signal told gpulint to stop (stop_on_signals).  Raised in the main thread like Ctrl-C's
    KeyboardInterrupt, so that every `finally` on the way out runs: run_once's ends the training
    process tree and says so in `ended` (the command it was running)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.ended: str | None = None


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGINT, SIGTERM, SIGHUP and SIGQUIT raise Stopped in the main thread instead
    of ending gpulint where it stands (SIGTERM's and SIGHUP's default), which would leave the
    training processes running: they are in a session of their own, so neither a closed terminal
    nor a signal to gpulint's process group reaches them.  A second signal while the first one's
    cleanup runs is ignored, so the cleanup is not cut short.  A signal ignored when gpulint
    started (`nohup` ignores SIGHUP) stays ignored.  Outside the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if not received:
            received.append(signum)
            raise Stopped(signum)

    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is None or signal.getsignal(number) is signal.SIG_IGN:
            continue
        previous[number] = signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@dataclass
class Command:
    interpreter: str
    options: list[str]  # interpreter options before the script
    target: list[str]  # [script, args...] or ["-m", module, args...]
    launch: Launch | None = None  # a distributed launcher that starts the ranks (then interpreter/options are unused)

    @property
    def script(self) -> Path | None:
        return None if self.target[0] == "-m" else Path(self.target[0])

    def argv(self, bootstrap: str) -> list[str]:
        if self.launch is not None:
            return [*self.launch.prefix, bootstrap, *self.target]
        return [self.interpreter, *self.options, bootstrap, *self.target]

    def display(self) -> str:
        if self.launch is not None:
            return " ".join([Path(self.launch.prefix[0]).name, *self.launch.prefix[1:], *self.target])
        return " ".join([Path(self.interpreter).name, *self.options, *self.target])


def parse_command(argv: list[str]) -> Command:
    """`python [opts] train.py ARGS`, `python -m pkg.train ARGS`, `train.py ARGS`, or one of those
    under a launcher (`torchrun ...`, `python -m torch.distributed.run ...`, `accelerate launch ...`)."""
    if not argv:
        raise CommandError("no command to run: give it after `--`, e.g. `gpulint profile -- python train.py`")
    try:
        launched = parse_launch(argv)
    except LaunchError as exc:
        raise CommandError(str(exc)) from None
    if launched is not None:
        launch, target = launched
        return Command(launch.prefix[0], [], target, launch)
    first = argv[0]
    if first.endswith(".py"):
        interpreter, rest = sys.executable, list(argv)
    elif re.fullmatch(r"python[0-9.]*", Path(first).name):
        found = shutil.which(first)
        if found is None:
            raise CommandError(f"interpreter {first!r} not found")
        interpreter, rest = found, list(argv[1:])
    else:
        raise CommandError(
            f"cannot profile {first!r}: use `-- python train.py ARGS`, `-- python -m package.module ARGS`, "
            "or a launcher: `-- torchrun ... train.py ARGS`, `-- accelerate launch ... train.py ARGS`"
        )
    options: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        if rest[0] in ("-c", "-"):
            raise CommandError("`python -c` and standard input cannot be profiled: give a script or -m module")
        options.append(rest.pop(0))
        if options[-1] in _OPTIONS_WITH_VALUE and rest:
            options.append(rest.pop(0))
    if not rest:
        raise CommandError("no script given to the interpreter")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise CommandError("`-m` needs a module name")
        return Command(interpreter, options, rest)
    if not Path(rest[0]).is_file():
        raise CommandError(f"script {rest[0]} does not exist")
    return Command(interpreter, options, rest)


@dataclass
class RunConfig:
    steps: int | None = 50
    warmup: int = 5
    seconds: float | None = None
    timeout: float = 600.0
    syncs: bool = True
    show_output: bool = False
    sys_path0: str | None = None  # see bootstrap.py
    source: str | None = None  # run this file's code as the script (see bootstrap.py)
    sample_interval: float = 0.25  # the parent's CPU sampler
    attribution: bool = True  # sample the training thread's stack (bootstrap.StackSampler)
    stack_interval: float | None = None  # seconds between its looks; None: bootstrap.SAMPLE_INTERVAL
    data_fns: list[str] = field(default_factory=list)  # functions timed as data wait (--data-fn)
    find_data_fn: bool = True  # time the batch function the training loop calls, when one is found
    # {"steps": N, "trace": bool}: profile N steps after the measured ones (--ops, --trace; see
    # bootstrap.OpsWindow); None: no profiler
    ops: dict | None = None


@dataclass
class StepStats:
    """The measured steps of a run (after warm-up), as the child reduced them: see
    bootstrap.StepClock.  `series` has one point per step unless the run was longer than
    bootstrap.SERIES_CAP steps; then each point sums `width` consecutive steps."""

    source: str  # what a step is: "optimizer steps", "Keras batches", "tf.data batches"
    total: int  # steps seen, warm-up included
    warmup: int
    count: int  # measured steps
    total_time: float  # seconds over the measured steps
    waited: float | None  # seconds waiting for input over them; None: not measured
    series: list[tuple[int, float, float]] = field(default_factory=list)  # (steps, seconds, seconds waiting)
    sample: list[float] = field(default_factory=list)  # step times: all, or a uniform sample of a long run
    data_note: str | None = None  # why data wait is not measured
    # What the step waited on for its batches: "DataLoader", "tf.data", "Keras fit input", or the
    # name of the user's function (--data-fn, or found in the loop: bootstrap._loop_batch_call)
    data_source: str | None = None
    data_function: dict | None = None  # that function: {"name", "where" (file:line of its def), "how"}
    batches: int | None = None  # input batches fetched in the measured window
    samples: int | None = None  # samples in those batches; None when a batch's size could not be read
    optimizers: dict[str, int] = field(default_factory=dict)  # optimizer -> steps (all)
    window: tuple[float, float] | None = None
    syncs: dict[str, int] = field(default_factory=dict)  # "file:line" -> syncs in the window

    @property
    def width(self) -> int:
        """Steps per point of the series (1 unless the run was long)."""
        return max((n for n, _, _ in self.series), default=1)

    @property
    def times(self) -> list[float]:
        """Seconds per step, one per point of the series (a point's mean over its steps)."""
        return [seconds / n for n, seconds, _ in self.series]

    @property
    def data_waits(self) -> list[float] | None:
        if self.waited is None:
            return None
        return [waited / n for n, _, waited in self.series]

    @property
    def mean(self) -> float:
        """Mean step time over the window: 1 / throughput."""
        return self.total_time / self.count

    @property
    def data_share(self) -> float | None:
        if self.waited is None or not self.count:
            return None
        return min(1.0, self.waited / self.total_time)

    def quantile(self, q: float) -> float:
        return stats.quantile(self.sample, q)

    @property
    def median(self) -> float:
        return stats.median(self.sample)

    @property
    def samples_per_second(self) -> float | None:
        return self.samples / self.total_time if self.samples and self.count else None


@dataclass
class ProcessRun:
    """One training process: the only one, or one rank of a launched run."""

    rank: int | None  # None without a launcher
    pid: int
    steps: StepStats | None
    report: dict  # as bootstrap.py wrote it: DDP timers, FLOPs, device memory, ...


@dataclass
class RunResult:
    command: str
    status: str  # stopped | finished | error | exit | timeout | no-report
    exit_code: int
    wall: float
    error: dict | None = None
    output_tail: str = ""
    steps: StepStats | None = None
    cpu: cpu_mod.CpuSummary | None = None
    gpu: nvml.GpuSummary | None = None
    gpu_unavailable: str | None = None
    cuda: bool = False
    instrumented: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    python: str | None = None  # the version that ran the script
    processes: list[ProcessRun] = field(default_factory=list)  # by rank; `steps` is the first one's

    @property
    def launched(self) -> bool:
        return any(p.rank is not None for p in self.processes)

    @property
    def ok(self) -> bool:
        """Measured: stopped after its steps, or finished normally with at least one measured step."""
        return self.status in ("stopped", "finished") and self.steps is not None and self.steps.count > 0


def analyze_steps(data: dict) -> StepStats | None:
    """The measured steps of the deciding source: optimizer steps (with several optimizers, the one
    that steps most often paces the step), else Keras fit batches, else tf.data batches; None
    when nothing stepped."""
    clocks = data.get("clocks") or []
    optimizers = [c for c in clocks if c["kind"] == "optimizer steps"]
    if optimizers:
        pacing = max(optimizers, key=lambda c: c["ends"])
    else:
        pacing = next((c for c in clocks if c["kind"] in ("Keras batches", "tf.data batches")), None)
    if pacing is None:
        return None
    counts: dict[str, int] = {}
    for optimizer in optimizers:
        counts[optimizer["name"]] = counts.get(optimizer["name"], 0) + optimizer["ends"]
    steps = StepStats(
        pacing["kind"],
        pacing["ends"],
        data["warmup"],
        pacing["measured"],
        pacing["seconds"],
        pacing["waited"],
        [tuple(point) for point in pacing["series"]],
        pacing["sample"],
        optimizers=counts,
        syncs=dict(data.get("syncs") or {}),
    )
    sources = data.get("sources") or {}
    if pacing["kind"] == "Keras batches" and not data.get("keras_timed"):
        steps.waited = None
        why = data.get("keras_untimed") or "its input was not read through a tf.data iterator"
        steps.data_note = f"Keras fit reads its batches inside the compiled step ({why}): data wait not measured"
    elif not data.get("fetches"):
        steps.waited = None
        steps.data_note = (
            "no DataLoader, tf.data iterator or batch function read in the step loop: data wait not measured "
            "(name the function that makes the batches with --data-fn)"
        )
    elif sources:  # the source the loop waited on longest
        steps.data_source = max(sources, key=lambda name: sources[name][0])
        steps.data_function = next(
            (f for f in data.get("data_functions") or [] if f["name"] == steps.data_source), None
        )
    if pacing["window"] is not None and pacing["measured"]:
        steps.window = tuple(pacing["window"])
        if steps.waited is not None:
            steps.batches = pacing["batches"]
            steps.samples = pacing["samples"] or None
    return steps


ProgressCallback = Callable[[dict], None]


def run_once(command: Command, config: RunConfig, progress: ProgressCallback | None = None) -> RunResult:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpulint-run-") as folder:
        out = os.path.join(folder, "result.json")
        progress_path = os.path.join(folder, "progress.json")
        env = dict(os.environ)
        env["GPULINT_RT_CONFIG"] = json.dumps(
            {
                "out": out,
                "progress": progress_path,
                "steps": config.steps,
                "warmup": config.warmup,
                "seconds": config.seconds,
                "syncs": config.syncs,
                "sys_path0": config.sys_path0,
                "source": config.source,
                "per_rank": command.launch is not None,
                "ops": config.ops,
                "stacks": config.attribution,
                "sample_interval": config.stack_interval,
                "data_fns": config.data_fns,
                "find_data_fn": config.find_data_fn,
                "parent": os.getpid(),
            }
        )
        argv = command.argv(BOOTSTRAP)
        log_path = os.path.join(folder, "output.log")
        with open(log_path, "wb") as log:
            sink = None if config.show_output else log
            gpu = nvml.GpuSampler(interval=0.2).start()
            try:
                process = subprocess.Popen(
                    argv,
                    stdout=sink,
                    stderr=subprocess.STDOUT if sink else None,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                gpu.stop()
                raise CommandError(f"cannot start {command.interpreter}: {exc}") from exc
            cpu = cpu_mod.CpuSampler(process.pid, interval=config.sample_interval).start()
            status = None
            last_progress: dict = {}
            try:
                status = _wait(
                    process, config, started, lambda: _reported(out, command), progress_path, progress, last_progress
                )
            except Stopped as stop:
                stop.ended = command.display()
                raise
            finally:
                if process.poll() is None:  # KeyboardInterrupt, or a timeout
                    _kill_tree(process)
                cpu.stop()
                gpu.stop()
        output = Path(log_path).read_bytes().decode(errors="replace")
        reports = _reports(out, command)
        if reports:  # before the folder goes: the trace of the first process is the one written
            _load_torch_trace(reports[0])
    result = _result(command, config, status, process.returncode, reports, output, cpu, gpu, time.monotonic() - started)
    if status == "timeout":
        assert result.error is not None, "_result describes the timeout"
        made = last_progress.get("steps", 0)
        result.error["message"] += (
            f"; it had made {made} step{'s' if made != 1 else ''}" if made else "; it had made no training step"
        )
    return result


def _wait(process, config: RunConfig, started: float, reported, progress_path: str, progress, last: dict) -> str | None:
    reported_at = None
    while process.poll() is None:
        now = time.monotonic()
        if now - started > config.timeout:
            last.update(_read_json(progress_path) or {})  # how far it got, for the report
            _kill_tree(process)
            return "timeout"
        if reported():
            reported_at = reported_at or now
            if now - reported_at > EXIT_GRACE_S:
                _kill_tree(process)
                return "killed-after-report"
        if progress is not None:
            state = _read_json(progress_path)
            if state:
                progress(state)
        time.sleep(POLL_S)
    return None


def _kill_tree(process: subprocess.Popen) -> None:
    """End the child and everything it started: SIGTERM to its process group and to every
    descendant that left the group (torchrun starts each rank in a session of its own), SIGKILL
    to whatever is left KILL_WAIT_S later."""
    try:
        tree = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):  # the group is empty (its leader gone)
            pass
        for descendant in tree:
            try:
                descendant.send_signal(sig)  # (psutil checks it is still the same process)
            except psutil.Error:
                pass
        deadline = time.monotonic() + KILL_WAIT_S
        try:
            process.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            continue
        _, tree = psutil.wait_procs(tree, timeout=max(0.0, deadline - time.monotonic()))
        if not tree:
            return


def _reports(out: str, command: Command) -> list[dict]:
    """What the training processes wrote: one report, or one per rank (in rank order) under a launcher."""
    if command.launch is None:
        data = _read_json(out)
        return [data] if data is not None else []
    reports = [data for data in map(_read_json, glob.glob(glob.escape(out) + ".rank*")) if data is not None]
    return sorted(reports, key=lambda d: d.get("rank") or 0)


def _load_torch_trace(report: dict) -> None:
    """Read the Chrome trace torch exported into the run's folder into the report
    ("torch_trace_document"); a trace that cannot be read is said in the report's "error"."""
    ops = report.get("ops")
    if not ops or not ops.get("torch_trace"):
        return
    document = _read_json(ops["torch_trace"])
    if document is None or not isinstance(document.get("traceEvents"), list):
        ops["error"] = ops.get("error") or "torch.profiler's trace could not be read: the trace holds the phases only"
        return
    ops["torch_trace_document"] = document


def _reported(out: str, command: Command) -> bool:
    """Every process has written its report (under a launcher: every rank of this node)."""
    if command.launch is None:
        return os.path.exists(out)
    files = glob.glob(glob.escape(out) + ".rank*")
    if not files:
        return False
    expected = (_read_json(files[0]) or {}).get("local_world_size") or 1
    return len(files) >= expected


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _result(command, config, status, returncode, reports, output, cpu, gpu, wall) -> RunResult:
    result = RunResult(command.display(), status or "no-report", returncode or 0, wall, output_tail=_tail(output))
    # A failed rank says why the run failed; otherwise the first rank stands for the run.
    data = next((r for r in reports if r["status"] in ("error", "exit")), reports[0] if reports else None)
    result.gpu_unavailable = gpu.unavailable
    if status == "timeout":
        result.exit_code = EXIT_TIMEOUT
        result.error = {"type": "Timeout", "message": f"no result after {config.timeout:g} s; stopped", "where": None}
    if data is not None:
        if status is None or status == "killed-after-report":
            result.status = data["status"]
            result.exit_code = data["exit_code"] or 0
            result.error = data["error"]
        result.cuda = data["cuda"]
        result.instrumented = data["instrumented"]
        result.python = data.get("python")
        result.notes = list(dict.fromkeys(note for report in [data, *reports] for note in report["notes"]))
        if command.launch and status is None and returncode and result.status in ("stopped", "finished"):
            result.status, result.exit_code = "exit", returncode
            result.error = {
                "type": "LauncherExit",
                "where": None,
                "message": f"{command.launch.name} exited with code {returncode}: "
                "a rank ended without the profiler's report",
            }
        if status == "killed-after-report":
            result.notes.append(f"the script did not exit within {EXIT_GRACE_S:g} s of being stopped and was killed")
        result.processes = [
            ProcessRun(r.get("rank") if command.launch else None, r["pid"], analyze_steps(r), r) for r in reports
        ]
        result.steps = result.processes[0].steps
    elif status is None:
        result.status = "no-report"
        result.exit_code = returncode if returncode else 1
        result.error = {
            "type": "NoReport",
            "message": f"the script exited (code {returncode}) without the profiler's report "
            "(os._exit or a crash of the interpreter)",
            "where": None,
        }
    start, end = result.steps.window if result.steps and result.steps.window else (None, None)
    ranks = [p.pid for p in result.processes] if command.launch else None
    result.cpu = cpu_mod.summarize(cpu, start, end, ranks=ranks)
    result.gpu = nvml.summarize(gpu, start, end)
    return result
