"""The runtime checker's verdicts against real training scripts that time their own phases.

    .venv/bin/python benchmarks/runtime_ground_truth.py                      # every case twice, then verify
    .venv/bin/python benchmarks/runtime_ground_truth.py --cases cifar-loader moco-straggler --runs 1
    .venv/bin/python benchmarks/runtime_ground_truth.py --no-verify --json ground-truth.json

The scripts are copies of training scripts from development repositories, in
benchmarks/ground_truth/<owner>__<name>/ (each with its licence, and a header saying what was
changed): synthetic data in place of downloads, a small model, one bottleneck chosen by
GT_BOTTLENECK (or none), and the script's own phase timers written as JSON to GT_TIMERS (per rank
under a launcher: GT_TIMERS.rank<RANK>), per step, by the suite's ground_truth/phase_timers.py.

Each case is profiled `--runs` times with `gpulint profile --json FILE` in a subprocess, as a user
runs it, from a scratch folder.  The script's own timers over the measured steps (the steps after
the warm-up, less the last, which the stop cuts short) say which phase dominates; the verdict is:

- right  it names that phase (compute-bound when compute dominates; under a launcher, the
         straggler when one rank's own extra work is 5% of a step or more) and its first fix is one
         that can change that phase (a compute-bound verdict may name no fix);
- vague  it names that phase but its first fix cannot change it, or it is inconclusive, or it
         names "other host work";
- wrong  it names another phase, or the run failed.

Then the verify checks: `gpulint verify` of fixes that change nothing measurable here and
`--param NAME=A,B` sweeps of two spellings of one value, each a call of its own; any "confirmed"
or "slowdown" claim, or "clearly best" value, is a false claim, and any traceback a failure.  The
load average is recorded beside every run (the machine may be shared).  Exits 1 when fewer than
95% of the verdicts are right, or on any false claim or failure.  See docs/runtime.md, "Measured
on real scripts".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "ground_truth"
RIGHT_SHARE = 0.95
# A rank whose own extra work is this share of its step is the straggler (the verdict's threshold,
# verdict.STRAGGLER_HIGH).
STRAGGLER_SHARE = 0.05

# The script's phase -> (the verdict's kind, its detail, the rules whose fix changes that phase; ""
# is a fix with no rule: the batches made cheaper, or ahead of the step).  Persistent workers
# (GL103) are no data fix here: they save the workers' start at an epoch's end, which no case's
# profile reaches (the shortest epoch is 200 steps).
PHASES = {
    "data": ("input-bound", None, {"GL101", "GL105", "GL605", "GL701", "GL702", "GL703", "GL708", ""}),
    "compute": ("compute-bound", None, {"GL401", "GL402", "GL403", "GL404", "GL704", "GL705"}),
    "validation": ("host-bound", "validation", {"GL301"}),
    "checkpoint": ("host-bound", "checkpoint writes", {"GL303"}),
    "logging": ("host-bound", "logging", {"GL302"}),
    "collectives": ("communication-bound", None, {"GL602", "GL603", "GL604", "GL605"}),
}


@dataclass
class Case:
    name: str
    folder: str  # under benchmarks/ground_truth/
    script: str
    args: list[str] = field(default_factory=list)
    bottleneck: str = "healthy"
    ranks: int = 1  # > 1: under torchrun, gloo on the CPU
    env: dict[str, str] = field(default_factory=dict)


CIFAR, GPT, MOCO = "kuangliu__pytorch-cifar", "karpathy__minGPT", "facebookresearch__moco"
GPT_SMALL = ["--model.model_type=gpt-nano", "--trainer.batch_size=16", "--data.block_size=64"]
MOCO_ARGS = ["--dist-url", "env://", "--dist-backend", "gloo", "-b", "32", "-j", "1", "unused"]
CASES = [
    Case("cifar-healthy", CIFAR, "main.py"),
    Case("cifar-loader", CIFAR, "main.py", bottleneck="loader"),
    Case("cifar-logging", CIFAR, "main.py", bottleneck="logging"),
    Case("cifar-validation", CIFAR, "main.py", bottleneck="validation"),
    Case("chargpt-healthy", GPT, "chargpt.py", GPT_SMALL),
    Case("chargpt-healthy-0-workers", GPT, "chargpt.py", [*GPT_SMALL, "--trainer.num_workers=0"]),
    Case("chargpt-healthy-micro", GPT, "chargpt.py", [*GPT_SMALL, "--model.model_type=gpt-micro"]),
    Case("chargpt-sample", GPT, "chargpt.py", GPT_SMALL, bottleneck="sample"),
    Case("moco-healthy", MOCO, "main_moco.py", MOCO_ARGS, ranks=2),
    Case("moco-healthy-mlp", MOCO, "main_moco.py", [*MOCO_ARGS[:-1], "--mlp", "unused"], ranks=2),
    Case("moco-checkpoint", MOCO, "main_moco.py", [*MOCO_ARGS[:5], "8", *MOCO_ARGS[6:]], "checkpoint", ranks=2),
    Case("moco-straggler", MOCO, "main_moco.py", MOCO_ARGS, bottleneck="straggler", ranks=2),
]


@dataclass
class VerifyCheck:
    name: str
    folder: str
    script: str
    options: list[str]  # what selects the fix or the values
    why: str  # why it changes nothing measurable


VERIFY_CHECKS = [
    # The test loader's workers kept alive: the test loop never runs in the measured steps.  (The
    # script's other fixes -- pinned memory, non-blocking copies, TF32 -- need a GPU: verify
    # refuses them on a CPU run.)
    VerifyCheck("null GL103", CIFAR, "main.py", ["--select", "GL103"], "persistent workers of a loader not read"),
    # Two spellings of one value: the copies differ in source, so both are measured.
    VerifyCheck("A/A lr", CIFAR, "main.py", ["--param", "lr=0.1,0.10"], "one learning rate spelled twice"),
    VerifyCheck("A/A workers", CIFAR, "main.py", ["--param", "num_workers=2,1+1"], "two workers spelled twice"),
]
VERIFY_ORDER = ["null GL103", "A/A lr", "A/A workers"]


# --- scoring (no processes: tests/runtime/test_ground_truth_harness.py checks it) ---


def measured_phases(timers: dict, warmup: int) -> dict[str, float]:
    """Seconds per phase over the measured steps: the per-step buckets after the set-up and the
    warm-up steps, less the last (the stop cuts it short).  Bucket i holds what happened from the
    i-th optimizer step of the script to the next."""
    buckets = timers["per_step"][warmup + 1 : -1]
    totals: dict[str, float] = {}
    for bucket in buckets:
        for phase, seconds in bucket.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    return totals


@dataclass
class Truth:
    phase: str  # a key of PHASES, or "straggler"
    rank: int | None  # the straggler's rank
    shares: dict[str, float]  # each phase's share of the step, by the script's timers (rank 0, or the straggler)


def ground_truth(timers_by_rank: dict[int, dict], warmup: int) -> Truth:
    """What the script's own timers say bounds its steps."""
    phases = {rank: measured_phases(timers, warmup) for rank, timers in timers_by_rank.items()}
    # The extra work one rank does ("straggle", timed by the script) makes the others wait for it
    # in DDP's all-reduce, inside their backward, where the script's timers cannot tell waiting
    # from computing: the straggler is the rank whose own extra work is a share of its step.
    for rank, own in sorted(phases.items()):
        total = sum(own.values())
        if len(phases) > 1 and total and own.get("straggle", 0.0) / total >= STRAGGLER_SHARE:
            return Truth("straggler", rank, {p: s / total for p, s in own.items()})
    first = phases[min(phases)]
    total = sum(first.values()) or 1.0
    shares = {p: s / total for p, s in first.items() if p in PHASES}
    return Truth(max(shares, key=lambda p: shares[p]), None, shares)


def score(truth: Truth, verdict: dict | None) -> tuple[str, str]:
    """(right | vague | wrong, why) for a profile's verdict (its `--json` "verdict") against the
    script's own timers."""
    if verdict is None:
        return "wrong", "no verdict"
    kind, detail = verdict["kind"], verdict.get("severity")
    fixes = [r["code"] for r in verdict.get("recommendations") or []]
    named = f"{kind} ({detail})" if detail else kind
    if kind == "inconclusive":
        return "vague", "inconclusive"
    if kind == "host-bound" and detail == "other host work":
        return "vague", "names other host work"
    if truth.phase == "straggler":
        if kind == "straggler" and detail == f"rank {truth.rank}":
            return "right", named
        return "wrong", f"{named}, not the straggler rank {truth.rank}"
    want_kind, want_detail, acting = PHASES[truth.phase]
    if kind != want_kind or (want_detail is not None and detail != want_detail):
        return "wrong", f"{named}, not {truth.phase} ({truth.shares.get(truth.phase, 0.0):.0%})"
    if not fixes:
        return ("right", named) if truth.phase == "compute" else ("vague", f"{named} with no fix")
    if fixes[0] not in acting:
        return "vague", f"{named}, first fix {fixes[0]} does not change {truth.phase}"
    return "right", f"{named}, first fix {fixes[0]}"


def false_claim(report: dict) -> str | None:
    """The claim a verify or sweep report makes beyond "no difference", if any."""
    outcome = (report.get("comparison") or {}).get("outcome")
    if outcome in ("confirmed", "slowdown"):
        return outcome
    if report.get("clearly_best"):
        return f"{report.get('param')}={report.get('best')} clearly best"
    return None


# --- running ---


def load() -> float:
    return os.getloadavg()[0]


def script_environment(env: dict[str, str]) -> dict[str, str]:
    """This process's environment with `env` on top, and on PYTHONPATH this checkout (gpulint) and
    SCRIPTS, where the scripts import their phase timers from: the profiled process, torchrun's
    workers and verify's runs inherit it."""
    environment = dict(os.environ, **env)
    path = [str(REPO), str(SCRIPTS), os.environ.get("PYTHONPATH")]
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    return environment


def gpulint(arguments: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "gpulint", *arguments]
    return subprocess.run(
        command, cwd=cwd, env=script_environment(env), capture_output=True, text=True, timeout=timeout
    )


def script_command(case: Case) -> list[str]:
    script = str(SCRIPTS / case.folder / case.script)
    if case.ranks > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={case.ranks}"]
        return [sys.executable, *launcher, script, *case.args]
    return [sys.executable, script, *case.args]


@dataclass
class ProfileRun:
    case: str
    run: int
    exit_code: int
    seconds: float
    load_before: float
    load_after: float
    verdict: str
    score: str
    why: str
    truth: str
    shares: dict[str, float]
    first_fix: str | None


def profile_case(case: Case, run: int, steps: int, warmup: int, scratch: Path) -> ProfileRun:
    folder = Path(tempfile.mkdtemp(prefix=f"{case.name}-{run}-", dir=scratch))
    report, timers = folder / "profile.json", folder / "timers.json"
    env = {"GT_BOTTLENECK": case.bottleneck, "GT_TIMERS": str(timers), "GT_WORK_DIR": str(folder / "out"), **case.env}
    options = ["profile", f"--steps={steps}", f"--warmup={warmup}", "--no-history", "--json", str(report)]
    before, started = load(), time.monotonic()
    done = gpulint([*options, "--", *script_command(case)], folder, env, timeout=900)
    seconds, after = time.monotonic() - started, load()
    (folder / "output.txt").write_text(done.stdout + done.stderr)
    verdict = json.loads(report.read_text()).get("verdict") if report.exists() else None
    if case.ranks > 1:
        timers_by_rank = {r: json.loads(Path(f"{timers}.rank{r}").read_text()) for r in range(case.ranks)}
    else:
        timers_by_rank = {0: json.loads(timers.read_text())} if timers.exists() else {}
    if done.returncode != 0 or not timers_by_rank:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        return ProfileRun(case.name, run, done.returncode, seconds, before, after, "-", "wrong", f"failed: {tail[0]}",
                          "-", {}, None)  # fmt: skip
    truth = ground_truth(timers_by_rank, warmup)
    verdict_score, why = score(truth, verdict)
    named = "-" if verdict is None else (verdict.get("headline") or verdict["kind"])
    fixes = [r["code"] for r in (verdict or {}).get("recommendations") or []]
    where = f"{truth.phase} (rank {truth.rank})" if truth.rank is not None else truth.phase
    return ProfileRun(case.name, run, 0, seconds, before, after, named, verdict_score, why, where,
                      {p: round(s, 3) for p, s in truth.shares.items()}, fixes[0] if fixes else None)  # fmt: skip


@dataclass
class VerifyRun:
    check: str
    call: int
    exit_code: int
    seconds: float
    load_before: float
    load_after: float
    outcome: str
    false_claim: str | None
    failure: str | None


def verify_check(check: VerifyCheck, call: int, scratch: Path) -> VerifyRun:
    folder = Path(tempfile.mkdtemp(prefix=f"verify-{call}-", dir=scratch))
    report = folder / "verify.json"
    script = str(SCRIPTS / check.folder / check.script)
    before, started = load(), time.monotonic()
    done = gpulint(["verify", script, *check.options, "--no-history", "--json", str(report)], folder, {}, timeout=1800)
    seconds, after = time.monotonic() - started, load()
    (folder / "output.txt").write_text(done.stdout + done.stderr)
    output = done.stdout + done.stderr
    failure = None
    if "Traceback (most recent call last)" in output or done.returncode not in (0, 1) or not report.exists():
        failure = f"exit {done.returncode}: " + ((output.strip().splitlines() or [""])[-1])
    document = json.loads(report.read_text()) if report.exists() else {}
    claim = false_claim(document)
    outcome = (document.get("comparison") or {}).get("outcome") or (
        f"best {document['best']}, clearly: {document.get('clearly_best')}" if "best" in document else "-"
    )
    return VerifyRun(check.name, call, done.returncode, seconds, before, after, outcome[:60], claim, failure)


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--runs", type=int, default=2, help="profiles of each case")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--verify-calls", type=int, default=10, help="verify and sweep calls, taken in turn")
    parser.add_argument("--no-verify", action="store_true")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--keep", type=Path, help="keep each run's folder (reports, timers, output) here")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.cases or c.name in args.cases]
    scratch = Path(tempfile.mkdtemp(prefix="gpulint-ground-truth-", dir=args.keep))
    profiles = []
    for run in range(1, args.runs + 1):
        for case in cases:
            result = profile_case(case, run, args.steps, args.warmup, scratch)
            said = f"{result.score} ({result.why}) {result.seconds:.0f}s load {result.load_after:.1f}"
            print(f"{case.name} #{run}: {said}", file=sys.stderr, flush=True)
            profiles.append(result)
    verifies = []
    if not args.no_verify:
        checks = {c.name: c for c in VERIFY_CHECKS}
        for call in range(args.verify_calls):
            check = checks[VERIFY_ORDER[call % len(VERIFY_ORDER)]]
            result = verify_check(check, call + 1, scratch)
            print(f"{check.name} #{call + 1}: {result.outcome} {result.seconds:.0f}s", file=sys.stderr, flush=True)
            verifies.append(result)

    print_table(
        [
            [
                p.case,
                p.run,
                p.truth,
                p.verdict,
                p.first_fix or "-",
                p.score,
                f"{p.load_before:.1f}/{p.load_after:.1f}",
                f"{p.seconds:.0f}",
            ]
            for p in profiles
        ],  # fmt: skip
        ["case", "run", "timers' dominant phase", "verdict", "first fix", "score", "load", "s"],
    )
    counts = {s: sum(p.score == s for p in profiles) for s in ("right", "vague", "wrong")}
    healthy = sum(1 for p in profiles for c in cases if c.name == p.case and c.bottleneck == "healthy")
    loads = [x for p in profiles for x in (p.load_before, p.load_after)]
    right_share = counts["right"] / len(profiles) if profiles else 0.0
    print(
        f"\n{len(profiles)} profiles ({healthy} healthy): right {counts['right']}, vague {counts['vague']}, "
        f"wrong {counts['wrong']} -- {right_share:.0%} right (target {RIGHT_SHARE:.0%}); "
        f"load average {min(loads, default=0):.1f}..{max(loads, default=0):.1f} on {os.cpu_count()} cores"
    )
    for p in profiles:
        if p.score != "right":
            print(f"  {p.case} #{p.run}: {p.score}: {p.why}")
    claims = [v for v in verifies if v.false_claim]
    failures = [v for v in verifies if v.failure]
    if verifies:
        print()
        print_table(
            [
                [
                    v.check,
                    v.call,
                    v.outcome,
                    v.false_claim or "-",
                    v.failure or "-",
                    f"{v.load_before:.1f}/{v.load_after:.1f}",
                    f"{v.seconds:.0f}",
                ]
                for v in verifies
            ],  # fmt: skip
            ["check", "call", "outcome", "false claim", "failure", "load", "s"],
        )
        print(f"\n{len(verifies)} verify calls: {len(claims)} false claims, {len(failures)} failures (target 0)")
    if args.json:
        document = {"profiles": [asdict(p) for p in profiles], "verify": [asdict(v) for v in verifies]}
        args.json.write_text(json.dumps(document, indent=1))
    scored = not profiles or right_share >= RIGHT_SHARE  # (--runs 0: the verify checks alone)
    return 0 if scored and not claims and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
