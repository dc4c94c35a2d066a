"""`gpulint verify SCRIPT --param num_workers=0,2,4`: measure each value instead of trusting a rule
of thumb.  A copy of SCRIPT's source per value takes `name=value` where the script takes it from
(an argparse option, a constant or the DataLoader keyword: script_params.py); the values run in
rotating order (each value goes first as often as the others), R runs each, from the script's own
folder as verify's arms do, and the value with the highest median (over runs) throughput is
recommended -- "clearly" only when it beats the runner-up with the confidence verify asks of a
speedup.  Throughput is samples per second where the batches' sizes are known (so batch sizes
compare fairly), else steps per second.

A run that runs out of memory is a result, not a failure: that value is marked out of memory and
not run again.  For a batch size the recommendation is memory.batch_advice's: the largest size
within 5% of the best throughput, with the learning-rate rule.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import libcst as cst

from gpulint.runtime_check import memory, stats
from gpulint.runtime_check.measure import Command, RunConfig, RunResult, run_once
from gpulint.runtime_check.script_params import ParamError, ParamSite, set_param
from gpulint.runtime_check.verify import Arm, compare


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


Value = TypeVar("Value")


def rotation(values: list[Value], runs: int) -> list[Value]:
    """A Latin square: round r starts at value r (mod n), so over n rounds every value takes every
    position once and none is always first (or always right after a slow one)."""
    order: list[Value] = []
    for r in range(runs):
        order += values[r % len(values) :] + values[: r % len(values)]
    return order


@dataclass
class Candidate(Arm):
    """The runs of one value (named by it), and whether it ran out of memory."""

    out_of_memory: bool = False

    @property
    def value(self) -> str:
        return self.name

    def throughputs(self, samples: bool) -> list[float]:
        """Samples (or steps) per second of each run."""
        if samples:
            rates = [steps.samples_per_second for steps in self.measured_steps]
            known = [rate for rate in rates if rate is not None]
            assert len(known) == len(rates), "samples per second are compared only when every run counts samples"
            return known
        return [1 / t for t in self.run_times]

    @property
    def counts_samples(self) -> bool:
        return all(steps.samples for steps in self.measured_steps)


@dataclass
class SweepResult:
    script: str
    name: str
    candidates: list[Candidate]
    order: list[str]
    best: Candidate | None = None
    clearly_best: bool = False
    failed: RunResult | None = None
    failed_value: str | None = None
    site: ParamSite | None = None  # where the script takes the value from
    batch: memory.BatchAdvice | None = None  # for a batch size
    # The best and the runner-up run the same source with the same arguments (the same value
    # twice, or values the script does not tell apart): no difference, whatever the runs say.
    same_run: bool = False

    @property
    def counts_samples(self) -> bool:
        """Every measured value's batches had a readable size: compare samples per second."""
        measured = [c for c in self.candidates if c.run_times]
        return bool(measured) and all(c.counts_samples for c in measured)

    @property
    def unit(self) -> str:
        return "samples/s" if self.counts_samples else "steps/s"

    def throughput(self, candidate: Candidate) -> float:
        """Median over runs, in `unit`."""
        return stats.median(candidate.throughputs(self.counts_samples))


def sweep(
    script: Path, args: list[str], param: str, runs: int, config: RunConfig, interpreter: str, progress=None
) -> SweepResult:
    if not script.is_file():
        raise SweepError(f"script {script} does not exist")
    name, values = parse_param(param)
    source = script.read_bytes()
    try:
        copies = {value: set_param(source, args, name, value) for value in values}
    except cst.ParserSyntaxError as exc:
        raise SweepError(f"{script} does not parse: {exc}") from None
    except ParamError as exc:
        raise SweepError(f"{script}: {exc}") from None
    site = copies[values[0]].site
    # By position: a value given twice (an A/A sweep) is two candidates, each with its own runs.
    schedule = rotation(list(range(len(values))), runs)
    result = SweepResult(str(script), name, [Candidate(v) for v in values], [values[i] for i in schedule], site=site)
    with tempfile.TemporaryDirectory(prefix="gpulint-sweep-") as folder:
        sources = []
        for index, value in enumerate(values):
            sources.append(Path(folder) / f"v{index}.py")
            sources[index].write_bytes(copies[value].source)
        for step, index in enumerate(schedule):
            candidate, value = result.candidates[index], values[index]
            if candidate.out_of_memory:
                continue  # it would run out again: the size is measured
            if progress is not None:
                progress(step, len(schedule), f"{name}={value}")
            command = Command(interpreter, [], [str(script), *copies[value].args])
            run = run_once(command, replace(config, source=str(sources[index])))
            candidate.runs.append(run)
            if not run.ok and memory.is_out_of_memory(run):
                candidate.out_of_memory = True
            elif not run.ok:
                result.failed, result.failed_value = run, value
                return result
    measured = [c for c in result.candidates if not c.out_of_memory and c.run_times]
    ranked = sorted(measured, key=lambda c: -result.throughput(c))
    if memory.is_batch_param(name):
        sizes = [
            memory.SizeResult(c.value, result.throughput(c) if c in measured else None, c.out_of_memory)
            for c in result.candidates
        ]
        result.batch = memory.batch_advice(sizes, site.current, result.unit)
    if ranked:
        samples = result.counts_samples
        result.best = ranked[0]
        if len(ranked) > 1:
            best, second = (copies[c.value] for c in ranked[:2])
            result.same_run = (best.source, best.args) == (second.source, second.args)
        # Faster by verify's test, on the time per sample (or step): 1 / throughput.
        result.clearly_best = (
            len(ranked) > 1
            and not result.same_run
            and min(len(c.run_times) for c in ranked[:2]) >= 2
            and compare(
                [1 / t for t in ranked[1].throughputs(samples)], [1 / t for t in ranked[0].throughputs(samples)]
            ).outcome
            == "confirmed"
        )
    return result
