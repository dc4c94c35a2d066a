"""`gpulint verify SCRIPT --param num_workers=0,2,4`: measure each value instead of trusting a rule
of thumb.  Every `DataLoader(...)` call of a copy of SCRIPT gets `name=value`; the copies run in
rotating order (each value goes first as often as the others), R runs each, from the script's own
folder as verify's arms do, and the value with the lowest median (over runs) of the mean step
time is recommended -- "clearly" only when it is faster than the runner-up with the confidence
verify asks of a speedup.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst

from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once
from gpulint.runtime_check.verify import Arm, compare

CALLS = {"DataLoader"}


class SweepError(Exception):
    """A parameter that cannot be swept: one line for the user."""


def parse_param(text: str) -> tuple[str, list[str]]:
    name, sep, values = text.partition("=")
    name = name.strip()
    choices = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name.isidentifier() or len(choices) < 2:
        raise SweepError(f"--param wants NAME=V1,V2[,...] with two values at least, not {text!r}")
    for value in choices:
        try:
            cst.parse_expression(value)
        except cst.ParserSyntaxError:
            raise SweepError(f"--param value {value!r} is not a Python expression") from None
    return name, choices


class _SetKeyword(cst.CSTTransformer):
    def __init__(self, name: str, value: str) -> None:
        super().__init__()
        self.name, self.value, self.count = name, cst.parse_expression(value), 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = updated.func
        called = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if called not in CALLS or any(a.star for a in updated.args):
            return updated
        self.count += 1
        args = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == self.name)]
        if args:  # the new keyword follows the last argument: give that one a plain comma
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        keyword = cst.Arg(value=self.value, keyword=cst.Name(self.name),
                          equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        return updated.with_changes(args=[*args, keyword])


def with_keyword(source: bytes, name: str, value: str) -> tuple[bytes, int]:
    """The source with `name=value` on every DataLoader call, and how many calls were changed."""
    transformer = _SetKeyword(name, value)
    module = cst.parse_module(source).visit(transformer)
    return module.bytes, transformer.count


def rotation(values: list[str], runs: int) -> list[str]:
    """A Latin square: round r starts at value r (mod n), so over n rounds every value takes every
    position once and none is always first (or always right after a slow one)."""
    order: list[str] = []
    for r in range(runs):
        order += values[r % len(values):] + values[: r % len(values)]
    return order


@dataclass
class SweepResult:
    script: str
    name: str
    candidates: list[Arm]  # one per value, named by it
    order: list[str]
    best: Arm | None = None
    clearly_best: bool = False
    failed: RunResult | None = None
    failed_value: str | None = None


def sweep(script: Path, args: list[str], param: str, runs: int, config: RunConfig, interpreter: str, progress=None) -> SweepResult:
    if not script.is_file():
        raise SweepError(f"script {script} does not exist")
    name, values = parse_param(param)
    source = script.read_bytes()
    try:
        copies = {value: with_keyword(source, name, value) for value in values}
    except cst.ParserSyntaxError as exc:
        raise SweepError(f"{script} does not parse: {exc}") from None
    if not any(count for _, count in copies.values()):
        raise SweepError(f"no DataLoader(...) call in {script} to set {name}= on")
    result = SweepResult(str(script), name, [Arm(v) for v in values], rotation(values, runs))
    by_value = {c.name: c for c in result.candidates}
    command = Command(interpreter, [], [str(script), *args])
    with tempfile.TemporaryDirectory(prefix="gpulint-sweep-") as folder:
        sources = {}
        for index, value in enumerate(values):
            sources[value] = Path(folder) / f"v{index}.py"
            sources[value].write_bytes(copies[value][0])
        for index, value in enumerate(result.order):
            if progress is not None:
                progress(index, len(result.order), f"{name}={value}")
            run = run_once(command, replace(config, source=str(sources[value])))
            by_value[value].runs.append(run)
            if not run.ok:
                result.failed, result.failed_value = run, value
                return result
    ranked = sorted(result.candidates, key=lambda c: c.median)
    result.best = ranked[0]
    result.clearly_best = compare(ranked[1].run_times, ranked[0].run_times).outcome == "confirmed"
    return result
