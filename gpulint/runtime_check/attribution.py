"""Where the whole step goes: the training thread's sampled stacks (bootstrap.StackSampler) turned
into phases -- data fetch, compute (forward, backward, optimizer), validation, checkpoint writes,
logging, host syncs, host-to-device copies, loader start-up, other host work -- each with its
share of the measured steps and the lines of the user's code that take the time.

A sample is judged from its anchor: the deepest frame of a function that was on the stack of an
optimizer step (the training loop, or a `train_step` it calls), so the line a phase names is the
statement of the loop that spends the time (`save_checkpoint(model)`), with the innermost line of
the user's code beside it (`torch.save(state, path)`).  In order, a sample is

- data wait: the thread was inside a training DataLoader's `__next__`;
- validation: it was fetching a batch with gradients off, or a line of the user's code from the
  anchor inward lies in a `with torch.no_grad()` / `torch.inference_mode()` block or a function
  decorated with one (the source is read with `ast`), outside any `torch.nn` module's forward:
  such a block inside the model (MoCo's key encoder) is training compute;
- loader start-up: the first library code under the innermost line of the user's code is
  `torch.utils.data` (a new iterator starting its workers), whatever that code runs in turn:
  starting a worker by fork runs `logging`'s fork hooks, by spawn it pickles the dataset, and
  neither is logging or a checkpoint;
- checkpoint writes: `torch.save` or pickle below the anchor, or a line of the user's from the
  anchor inward saves (`torch.save(`, `save...(`, `checkpoint`, `ckpt`, ...) with no model code
  below the innermost line;
- logging: `logging` or TensorBoard below the anchor, or the innermost line prints, writes,
  flushes or fsyncs with no model code below it;
- host sync: the innermost line reads a tensor on the host (`.item()`, `.tolist()`, `.cpu()`,
  `.numpy()`) with no model code below it -- on CUDA that is where the host waits for the device;
- compute: forward (`torch.nn` modules), backward (autograd) or the optimizer below the anchor;
- collectives: `torch.distributed` below the anchor (DDP's own all-reduce runs inside backward
  and is timed by DDP: distributed.py);
- loader start-up: other `torch.utils.data` code below the anchor;
- host-to-device copies: the innermost line copies (`.to(`, `.cuda(`);
- other host work: anything else, by line.

The shares are the sampled time of a phase over the sampled time of the measured window (each
look weighted by the time since the last: bootstrap.StackSampler), so a phase seen in a few looks
is noise; the verdict uses them beside the timers' data wait and DDP's collective wait.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpulint.linter.run.safe_files import read_regular_file
from gpulint.runtime_check.verdict import HOST_PHASE_RULES

DATA = "data wait"
VALIDATION = "validation"
CHECKPOINT = "checkpoint writes"
LOGGING = "logging"
HOST_SYNC = "host sync"
COMPUTE = "compute"
COLLECTIVES = "collectives"
LOADER_START = "loader start-up"
COPIES = "host-to-device copies"
OTHER = "other host work"

_COMPUTE_MARKS = {"forward", "backward", "optimizer"}
# Library code that may run under a line that logs or saves (formatting a tensor for a log line).
_QUIET_MARKS = {"logging", "tensorboard", "torch.save", "pickle", "tensor"}
_SAVES = re.compile(r"torch\.save\(|\bsave\w*\(|_save\w*\(|pickle\.dump|checkpoint|ckpt", re.I)
_LOGS = re.compile(
    r"\bprint\(|\.write\(|\.flush\(|fsync\(|\blogger\.|\blogging\.|\.log\(|add_scalar|json\.dump|wandb\."
)
_SYNCS = re.compile(r"\.item\(\)|\.tolist\(\)|\.cpu\(\)|\.numpy\(\)")
_COPIES = re.compile(r"\.to\(|\.cuda\(")
_NO_GRAD = {"no_grad", "inference_mode"}
MIN_LINE_SHARE = 0.01  # lines under this share of the sampled time are not listed


@dataclass
class Line:
    where: str  # file:line of the anchor (the loop's statement)
    text: str
    share: float
    inner: str | None = None  # file:line of the innermost user line, when it differs
    inner_text: str = ""


@dataclass
class Phase:
    name: str
    share: float  # of the sampled time
    lines: list[Line] = field(default_factory=list)
    # How many looks saw it (None: a report recorded before the sampler counted them).  One look
    # the system delayed carries all the time since the one before: a phase seen in a look or two
    # is not evidence (verdict.MIN_PHASE_LOOKS).
    looks: int | None = None

    @property
    def rule(self) -> str | None:
        return HOST_PHASE_RULES[self.name][0] or None if self.name in HOST_PHASE_RULES else None


@dataclass
class Attribution:
    looks: int  # looks at the stack
    interval: float
    phases: list[Phase]  # largest first
    note: str = ""

    def share(self, name: str) -> float:
        return next((p.share for p in self.phases if p.name == name), 0.0)

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def host_shares(self) -> dict[str, float]:
        return {p.name: p.share for p in self.phases if p.name in HOST_PHASE_RULES}

    @property
    def host_looks(self) -> dict[str, int]:
        return {p.name: p.looks for p in self.phases if p.name in HOST_PHASE_RULES and p.looks is not None}


class _Sources:
    """The user's files, each read and parsed once: the statement a line belongs to (a statement
    spread over several lines is judged and shown whole, from its first line) and the line
    ranges run with gradients off."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.statements: dict[str, dict[int, tuple[int, int]]] = {}  # line -> (first, last) of its statement
        self.no_grad: dict[str, list[tuple[int, int]]] = {}

    def _load(self, path: str) -> None:
        if path in self.lines:
            return
        try:
            text = read_regular_file(Path(path)).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            text = ""
        self.lines[path] = text.splitlines()
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        self.statements[path] = _statement_spans(tree) if tree else {}
        self.no_grad[path] = _no_grad_ranges(tree) if tree else []

    def first_line(self, path: str, row: int) -> int:
        self._load(path)
        return self.statements[path].get(row, (row, row))[0]

    def text(self, path: str, row: int) -> str:
        """The statement at `row`, its lines joined."""
        self._load(path)
        lines = self.lines[path]
        first, last = self.statements[path].get(row, (row, row))
        return " ".join(line.strip() for line in lines[max(0, first - 1) : last]).strip()

    def in_no_grad(self, path: str, row: int) -> bool:
        self._load(path)
        return any(first <= row <= last for first, last in self.no_grad[path])


def _statement_spans(tree: ast.AST) -> dict[int, tuple[int, int]]:
    """Each line -> the lines of the innermost statement holding it; for a compound statement
    (`for`, `with`, `if`, `def`, ...) only its header counts as its own."""
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):  # outer statements first, so inner ones overwrite them
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        last = (body[0].lineno - 1 if body and isinstance(body, list) else node.end_lineno) or node.lineno
        for row in range(node.lineno, max(node.lineno, last) + 1):
            spans[row] = (node.lineno, max(node.lineno, last))
    return spans


def _no_grad_ranges(tree: ast.AST) -> list[tuple[int, int]]:
    """Line ranges run with gradients off: `with torch.no_grad():` (or inference_mode, or
    set_grad_enabled(False)) blocks and functions decorated with one."""
    ranges = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_turns_grad_off(i.context_expr) for i in node.items):
            ranges.append((node.body[0].lineno, node.end_lineno or node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            _turns_grad_off(d) for d in node.decorator_list
        ):
            ranges.append((node.lineno, node.end_lineno or node.lineno))
    return ranges


def _turns_grad_off(node: ast.expr) -> bool:
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call else node
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    if name in _NO_GRAD:
        return True
    if name == "set_grad_enabled" and call and call.args:
        first = call.args[0]
        return isinstance(first, ast.Constant) and first.value is False
    return False


def attribute(report: dict) -> Attribution | None:
    """The phases of the measured steps of one training process, from its report; None when its
    stack was not sampled (a run too short, or a TensorFlow loop without optimizer steps)."""
    stacks = report.get("stacks")
    if not stacks or not stacks.get("seconds"):
        return None
    anchors = {(path, first) for path, first, _name in report.get("step_functions") or []}
    sources = _Sources()
    total = stacks["seconds"]
    seconds: dict[str, float] = {}
    looks: dict[str, int] = {}
    counted = all("looks" in stack for stack in stacks["stacks"])  # (older reports did not count)
    by_line: dict[str, dict[tuple, float]] = {}
    for stack in stacks["stacks"]:
        name, key = _classify(stack["fetch"], stack["frames"], anchors, sources)
        seconds[name] = seconds.get(name, 0.0) + stack["seconds"]
        if counted:
            looks[name] = looks.get(name, 0) + stack["looks"]
        if key is not None:
            of_phase = by_line.setdefault(name, {})
            of_phase[key] = of_phase.get(key, 0.0) + stack["seconds"]
    phases = []
    for name, t in sorted(seconds.items(), key=lambda kv: -kv[1]):
        phase = Phase(name, t / total, looks=looks.get(name) if counted else None)
        for (where, inner), k in sorted(by_line.get(name, {}).items(), key=lambda kv: -kv[1]):
            if k / total < MIN_LINE_SHARE and phase.lines:
                break
            path, _, row = where.rpartition(":")
            entry = Line(where, sources.text(path, int(row)), k / total)
            if inner and inner != where:
                inner_path, _, inner_row = inner.rpartition(":")
                entry.inner, entry.inner_text = inner, sources.text(inner_path, int(inner_row))
            phase.lines.append(entry)
        phases.append(phase)
    note = (
        f"{stacks['looks']} looks at the training thread's stack, one every {1000 * stacks['interval']:.0f} ms "
        "or when the GIL allowed, each weighted by the time since the last"
    )
    if stacks.get("lost"):
        note += f"; {100 * stacks['lost'] / (total + stacks['lost']):.1f}% of the time not classified"
    return Attribution(stacks["looks"], stacks["interval"], phases, note)


def stack_phases(stacks: list[dict], step_functions: list | None) -> list[tuple[str, str]]:
    """The phase of each sampled stack (bootstrap.StackSampler's "stacks"), judged as attribute()
    judges it, with the statement of the loop it names (`train.py:42 save(model)`, or "")."""
    anchors = {(path, first) for path, first, _name in step_functions or []}
    sources = _Sources()
    phases = []
    for stack in stacks:
        name, key = _classify(stack["fetch"], stack["frames"], anchors, sources)
        where = ""
        if key is not None:
            path, _, row = key[0].rpartition(":")
            where = f"{Path(path).name}:{row} {sources.text(path, int(row))}"
        phases.append((name, where))
    return phases


def _outside_forward(below: list) -> list:
    """The user frames of `below` (the anchor, then inward) above the first `torch.nn` module call:
    a `no_grad` block inside a module's forward is part of the training step (MoCo's key encoder,
    a momentum update), not validation."""
    frames = []
    for frame in below:
        if frame == "forward":
            break
        if isinstance(frame, list):
            frames.append(frame)
    return frames


def _classify(fetch: str, frames: list, anchors: set, sources: _Sources) -> tuple[str, tuple | None]:
    """(phase, (anchor file:line, innermost user file:line)) of one sampled stack."""
    users = [i for i, f in enumerate(frames) if isinstance(f, list)]
    if not users:
        return (DATA if fetch == "train" else VALIDATION if fetch == "eval" else OTHER), None
    anchor = next((i for i in reversed(users) if (frames[i][0], frames[i][2]) in anchors), users[0])
    below = frames[anchor:]
    user_below = [f for f in below if isinstance(f, list)]
    marks = {f for f in below if isinstance(f, str)}
    innermost = user_below[-1]
    under_innermost = [f for f in frames[users[-1] + 1 :] if isinstance(f, str)]  # library code, outermost first
    tail = set(under_innermost)
    anchor_path, anchor_row = frames[anchor][0], frames[anchor][1]
    key = (
        f"{anchor_path}:{sources.first_line(anchor_path, anchor_row)}",
        f"{innermost[0]}:{sources.first_line(innermost[0], innermost[1])}",
    )
    text = sources.text(innermost[0], innermost[1])
    if fetch == "train":
        return DATA, key
    if fetch == "eval" or any(sources.in_no_grad(path, row) for path, row, _ in _outside_forward(below)):
        return VALIDATION, key
    if under_innermost[:1] == ["data"]:  # the loader's own work, whatever it calls (see the module docstring)
        return LOADER_START, key
    quiet = tail <= _QUIET_MARKS
    if marks & {"torch.save", "pickle"} or (quiet and any(_SAVES.search(sources.text(p, r)) for p, r, _ in user_below)):
        return CHECKPOINT, key
    if marks & {"logging", "tensorboard"} or (quiet and _LOGS.search(text)):
        return LOGGING, key
    if not tail and _SYNCS.search(text):
        return HOST_SYNC, key
    if marks & _COMPUTE_MARKS:
        return COMPUTE, key
    if "distributed" in marks:
        return COLLECTIVES, key
    if "data" in marks:
        return LOADER_START, key
    if not tail and _COPIES.search(text):
        return COPIES, key
    return OTHER, key
