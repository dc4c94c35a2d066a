"""`gpulint profile --ops` and `--trace`: the operators of a few steps profiled after the measured
ones (bootstrap.OpsWindow runs torch.profiler there), read the way the method reads an operator
table, and a Chrome trace (Trace Event Format) of those steps that Perfetto, TensorBoard and the
Chrome DevTools Performance panel open.

The trace is torch's own exported trace (operators, CUDA kernels and copies, on their threads and
streams) with the checker's step phases added as a process of their own ("gpulint: step phases"): each profiled
step, each training batch fetch (data wait), and the phase the training thread's sampled stack was
in (compute, checkpoint writes, logging, validation ...: attribution.py), with the loop's line.
Merging keeps everything a user of the PyTorch profiler expects to find in the file (TensorBoard's
plugin and HTA read torch's own events and its ProfilerStep#N markers), and puts the phases on the
same time axis: the child notes the wall clock against its monotonic clock, and torch times its
events on the wall clock from `baseTimeNanoseconds`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpulint.linter.printable import printable
from gpulint.linter.run.safe_files import OutputFile
from gpulint.runtime_check.attribution import stack_phases

# Operator kinds by name (torch's `aten::addmm`, CUDA kernels' `ampere_sgemm_128x64_tn` or
# `cutlass_...`, the profiler's `Memcpy HtoD`); the first that matches wins, the rest is "other".
# Why these groups: matrix products and convolutions are the model's own arithmetic, and when they
# fill the step the hardware is the limit; copies (conversions, host-device transfers,
# concatenation) and elementwise operators (activations, adds, the optimizer's foreach updates)
# move memory for little arithmetic, which code changes (fusion, torch.compile, fewer
# conversions, pinned memory) can shrink.  The DataLoader's range (`enumerate(DataLoader)#...`, whose
# self time is the dataset's Python code and the wait for workers) is the method's first reading,
# so it is a kind of its own; so are collectives (c10d, NCCL, Gloo), which a communication-bound
# run waits in.  Norms, softmax and reductions stay "other".
MATMUL_CONV = "matmul/conv"
ELEMENTWISE = "elementwise"
COPIES = "copies"
DATA_LOADER = "DataLoader"
COLLECTIVES = "collectives"
OTHER = "other"
OPERATOR_KINDS = (
    (DATA_LOADER, re.compile(r"^enumerate\(DataLoader\)")),
    (COLLECTIVES, re.compile(r"^c10d::|^record_param_comms$|nccl|gloo:", re.IGNORECASE)),
    (
        MATMUL_CONV,
        re.compile(
            r"^aten::(mm|addmm|bmm|baddbmm|addbmm|addmv|mv|dot|matmul|linear|einsum|_addmm_activation|_int_mm|_scaled_mm)$"
            r"|conv|gemm|gemv|cublas|cutlass|winograd|xmma|scaled_dot_product|flash|fmha",
            re.IGNORECASE,
        ),
    ),
    (
        COPIES,
        re.compile(
            r"^aten::(copy_|to|_to_copy|_copy_from|_copy_from_and_resize|contiguous|clone|cat|_cat|stack"
            r"|pin_memory|_pin_memory)$|memcpy|memset|CatArrayBatchedCopy|copy_kernel",
            re.IGNORECASE,
        ),
    ),
    (
        ELEMENTWISE,
        re.compile(
            r"^aten::(add|sub|rsub|mul|div|neg|abs|exp|log|pow|sqrt|rsqrt|reciprocal|square|sign|relu|gelu|silu"
            r"|sigmoid|tanh|leaky_relu|hardtanh|elu|threshold|threshold_backward|gelu_backward|silu_backward"
            r"|sigmoid_backward|tanh_backward|clamp|clamp_min|clamp_max|where|maximum|minimum|eq|ne|lt|le|gt|ge"
            r"|fill|zero|dropout|native_dropout|native_dropout_backward|addcmul|addcdiv|lerp|_foreach_\w+)_?$"
            r"|elementwise_kernel",
            re.IGNORECASE,
        ),
    ),
)
KINDS = (MATMUL_CONV, ELEMENTWISE, COPIES, DATA_LOADER, COLLECTIVES, OTHER)

# The method's two readings of the table.
DATA_LOADER_HIGH = 0.20  # DataLoader share of the step from which the input pipeline is the fix
MATMUL_DOMINATES = 0.50  # share of the step in matmuls/convolutions from which the hardware is the limit
FEW_OPERATORS = 0.80  # "a few big ones": the operators that together make this share of matmul/conv time
TOP_ROWS = 10  # operators printed

# The phases' process in the trace, named by its metadata.  Numbers, as the format has them (a viewer
# may take a string pid, Perfetto only as a "quick-and-dirty" extension); above Linux's largest
# process id (PID_MAX_LIMIT, 2**22), so that no real process's events are ever merged with it.
GPULINT_PID = 2**22 + 1
GPULINT_PROCESS = "gpulint: step phases"
# (thread id, name) of its tracks
STEPS_TRACK, DATA_TRACK, PHASES_TRACK = (1, "steps"), (2, "data wait"), (3, "phases (sampled stack)")


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in OPERATOR_KINDS if pattern.search(name)), OTHER)


@dataclass
class Operator:
    name: str
    calls: int
    self_cpu: float  # seconds over the profiled steps
    self_device: float
    kind: str


@dataclass
class OpsReport:
    steps: list[int]  # the numbers of the profiled steps (warm-up steps counted)
    measured: int  # the measured steps they follow
    step_time: float | None  # mean wall time of a profiled step
    operators: list[Operator] = field(default_factory=list)  # largest self time first
    rows: int = 0  # distinct operators (the list may be capped)
    device: bool = False  # device (CUDA) time was recorded
    kinds_cpu: dict[str, float] = field(default_factory=dict)  # kind -> share of operator self CPU time
    kinds_device: dict[str, float] = field(default_factory=dict)  # kind -> share of operator device time
    outside_operators: float | None = None  # share of the profiled steps' host time in no operator
    data_share: float | None = None  # share of the profiled steps spent fetching training batches
    readings: list[str] = field(default_factory=list)
    note: str = ""  # why there are no operators


def ops_report(report: dict, measured: int) -> OpsReport:
    """The operator table of one process's report."""
    ops = report.get("ops")
    if not ops:
        return OpsReport([], measured, None, note="the script ended with the measured steps: none was left to profile")
    steps = ops.get("steps") or []
    wall = sum(end - start for start, end in steps)
    first = ops["first_step"]
    result = OpsReport(
        steps=list(range(first, first + len(steps))),
        measured=measured,
        step_time=wall / len(steps) if steps else None,
        device=bool(ops.get("device")),
        note=ops.get("error") or "",
    )
    if wall > 0 and report.get("fetches"):
        window = steps[0][0], steps[-1][1]
        fetched = sum(max(0.0, min(end, window[1]) - max(start, window[0])) for start, end in ops.get("fetches") or [])
        result.data_share = fetched / wall
    totals = ops.get("totals")
    if ops.get("operators") is not None and totals:
        result.operators = [
            Operator(r["name"], r["calls"], r["self_cpu"], r["self_device"], kind_of(r["name"]))
            for r in ops["operators"]
        ]
        result.rows = totals["rows"]
        result.kinds_cpu = _kind_shares(result.operators, "self_cpu", totals["self_cpu"])
        if result.device:
            result.kinds_device = _kind_shares(result.operators, "self_device", totals["self_device"])
        if wall > 0:
            result.outside_operators = min(1.0, totals["outside_operators"] / wall)
    result.readings = _readings(result, wall)
    return result


def _kind_shares(operators: list[Operator], clock: str, total: float) -> dict[str, float]:
    """Each kind's share of `total`; what the capped list leaves out counts as other."""
    if total <= 0:
        return {}
    shares = dict.fromkeys(KINDS, 0.0)
    for operator in operators:
        shares[operator.kind] += getattr(operator, clock) / total
    shares[OTHER] += max(0.0, 1.0 - sum(shares.values()))
    return shares


def _readings(ops: OpsReport, wall: float) -> list[str]:
    """The method's two readings: DataLoader over 20% of the step -> the input pipeline; a few
    big matmuls/convolutions filling the step -> the hardware's limit for this model."""
    readings = []
    if ops.data_share is None:
        readings.append("data wait not measured in the profiled steps (no DataLoader or tf.data read in the step)")
    elif ops.data_share >= DATA_LOADER_HIGH:
        readings.append(
            f"fetching batches (DataLoader, tf.data) takes {100 * ops.data_share:.0f}% of the profiled steps "
            f"({100 * DATA_LOADER_HIGH:.0f}% or more): fix the input pipeline first"
        )
    else:
        readings.append(
            f"fetching batches (DataLoader, tf.data) takes {100 * ops.data_share:.0f}% of the profiled steps "
            f"(under {100 * DATA_LOADER_HIGH:.0f}%): the input pipeline is not what limits them"
        )
    if not ops.operators or wall <= 0:
        return readings
    clock = "self_device" if ops.device else "self_cpu"
    where = "device" if ops.device else "host"
    big = sorted((o for o in ops.operators if o.kind == MATMUL_CONV), key=lambda o: -getattr(o, clock))
    matmul = sum(getattr(o, clock) for o in big)
    share = matmul / wall
    if share >= MATMUL_DOMINATES:
        few, running = 0, 0.0
        for operator in big:
            few, running = few + 1, running + getattr(operator, clock)
            if running >= FEW_OPERATORS * matmul:
                break
        readings.append(
            f"{few} matmul/convolution operator{'s' if few != 1 else ''} take {100 * share:.0f}% of the profiled "
            f"steps' {where} time ({100 * MATMUL_DOMINATES:.0f}% or more): the model's own arithmetic fills the step, "
            "so this run is near what this hardware does for this model: more GPUs or a smaller model, not code fixes"
        )
    else:
        readings.append(
            f"matmuls and convolutions take {100 * share:.0f}% of the profiled steps' {where} time "
            f"(under {100 * MATMUL_DOMINATES:.0f}%): the hardware is not the limit yet; the rest of the step is "
            "where code changes pay"
        )
    return readings


def table_rows(ops: OpsReport) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the top operators by self time."""
    header = ["operator", "calls", "self CPU", "CPU share"]
    if ops.device:
        header += ["self CUDA", "CUDA share"]
    header.append("kind")
    cpu_total = sum(o.self_cpu for o in ops.operators) or 1.0
    device_total = sum(o.self_device for o in ops.operators) or 1.0
    key = (lambda o: -o.self_device) if ops.device else (lambda o: -o.self_cpu)
    rows = []
    for operator in sorted(ops.operators, key=key)[:TOP_ROWS]:
        row = [
            printable(operator.name),  # a `record_function` range is named by the user's code
            str(operator.calls),
            f"{1000 * operator.self_cpu:.2f} ms",
            f"{100 * operator.self_cpu / cpu_total:.1f}%",
        ]
        if ops.device:
            row += [f"{1000 * operator.self_device:.2f} ms", f"{100 * operator.self_device / device_total:.1f}%"]
        row.append(operator.kind)
        rows.append(row)
    return header, rows


# -- the trace -------------------------------------------------------------------------------
def trace_document(report: dict) -> dict | None:
    """The Chrome trace of the profiled steps of one process's report: torch's events (when torch
    profiled them) and the step phases.  None when no window was profiled."""
    ops = report.get("ops")
    if not ops or not ops.get("steps"):
        return None
    torch_trace = ops.get("torch_trace_document")
    offset = ops["clock_offset"]
    first_start = ops["steps"][0][0]
    if torch_trace:
        document = {key: value for key, value in torch_trace.items() if key != "traceEvents"}
        events = list(torch_trace.get("traceEvents") or [])
        base_us = (torch_trace.get("baseTimeNanoseconds") or 0) / 1000
    else:  # no torch trace: the phases alone, from the first profiled step
        document, events = {"displayTimeUnit": "ms"}, []
        base_us = (first_start + offset) * 1e6

    def at(moment: float) -> int:
        """A time on the child's monotonic clock, in the trace's microseconds."""
        return round((moment + offset) * 1e6 - base_us)

    def slice_event(name: str, track: tuple[int, str], start: float, end: float, args: dict | None = None) -> dict:
        event = {
            "ph": "X",
            "cat": "gpulint",
            "name": name,
            "pid": GPULINT_PID,
            "tid": track[0],
            # whole microseconds, exact in a double: a slice ending where the next starts never
            # overlaps it (fractions would, by a rounding error, and nest the next one inside it)
            "ts": at(start),
            "dur": max(0, at(end) - at(start)),
        }
        if args:
            event["args"] = args
        return event

    first_step = ops["first_step"]
    mine = [
        {"ph": "M", "name": "process_name", "pid": GPULINT_PID, "tid": 0, "args": {"name": GPULINT_PROCESS}},
        {"ph": "M", "name": "process_sort_index", "pid": GPULINT_PID, "tid": 0, "args": {"sort_index": -1}},
    ]
    for index, (tid, track) in enumerate((STEPS_TRACK, DATA_TRACK, PHASES_TRACK)):
        mine.append({"ph": "M", "name": "thread_name", "pid": GPULINT_PID, "tid": tid, "args": {"name": track}})
        mine.append(
            {"ph": "M", "name": "thread_sort_index", "pid": GPULINT_PID, "tid": tid, "args": {"sort_index": index}}
        )
    for number, (start, end) in enumerate(ops["steps"], start=first_step):
        mine.append(slice_event(f"step {number}", STEPS_TRACK, start, end, {"step": number}))
    for start, end in ops.get("fetches") or []:
        mine.append(slice_event("data wait", DATA_TRACK, start, end))
    stacks = ops.get("stacks")
    if stacks and stacks.get("timeline"):
        phases = stack_phases(stacks["stacks"], report.get("step_functions"))
        last_end = ops["steps"][-1][1]
        for phase, line, start, end in _runs(stacks["timeline"], phases, first_start):
            if start >= last_end:
                break
            end = min(end, last_end)  # a look after the last step stands for time outside the steps
            mine.append(slice_event(phase, PHASES_TRACK, start, end, {"line": line} if line else None))
    document["traceEvents"] = events + mine
    document.setdefault("displayTimeUnit", "ms")
    return document


def _runs(timeline: list, phases: list[tuple[str, str]], start: float):
    """Consecutive looks at the same phase and line as one slice: a look at time t stands for the
    time since the previous look."""
    current: list | None = None
    previous = start
    for at, index in timeline:
        phase, line = phases[index]
        if current is not None and (current[0], current[1]) == (phase, line):
            current[3] = at
        else:
            if current is not None:
                yield tuple(current)
            current = [phase, line, previous, at]
        previous = at
    if current is not None:
        yield tuple(current)


def write_trace(target: OutputFile, document: dict) -> None:
    """Write the trace in one rename; never through a symbolic link (WriteRefused)."""
    target.write(json.dumps(document).encode())
