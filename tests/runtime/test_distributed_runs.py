"""End to end on real child processes, CPU only: a profile under torchrun (two gloo ranks), `scale`
on the fixture that scales and on the one made communication-bound on purpose, and a batch-size
sweep that runs out of memory.  Slow: every torchrun run imports torch in the launcher and in each
rank."""

import json
import sys

import pytest

from gpulint.runtime_check.history import History
from tests.runtime.test_runs import FIXTURES, SCRIPTS, gpulint, leftovers

DDP = str(FIXTURES / "ddp_sleep_compute.py")
# All-reduce time several times the compute, so that two runs per size put the whole efficiency
# interval below the 90% bar even on a loaded 2-core machine (32 MB with 20 ms sometimes did not).
COMMUNICATION_BOUND = ["--gradient-mb", "128", "--compute-ms", "10"]

pytestmark = pytest.mark.slow


@pytest.mark.timed  # (two ranks on the cores: its verdict compares them)
def test_profile_under_torchrun_instruments_every_rank(tmp_path):
    out = tmp_path / "profile.json"
    run = gpulint(
        tmp_path,
        "profile",
        "--steps",
        "6",
        "--warmup",
        "2",
        "--json",
        str(out),
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        DDP,
        *COMMUNICATION_BOUND,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Per rank (2 of world size 2)" in run.stdout and "collective wait" in run.stdout, run.stdout
    assert "Verdict: communication-bound" in run.stdout and "bucket_cap_mb" in run.stdout, run.stdout
    report = json.loads(out.read_text())
    ranks = report["ranks"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["steps"] == 6 for r in ranks)
    assert all(r["collective_wait"] > 0 and r["samples_per_step"] == 8 for r in ranks)
    assert report["ranks"]["ddp_config"]["backend_name"] == "gloo"
    # CPU: FLOPs are counted, the peak is not known, device memory does not exist -- all said so.
    compute = report["compute"]
    assert compute["flops_per_step"]["value"] > 0 and compute["mfu"]["value"] is None
    assert "ran on the CPU" in compute["mfu"]["note"]
    assert all(f["value"] is None and f["note"] for f in report["memory"]["figures"])
    assert leftovers(tmp_path) == []


def test_a_rank_that_crashes_is_reported_with_its_error(tmp_path):
    run = gpulint(
        tmp_path,
        "profile",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "1",
        str(SCRIPTS / "crash.py"),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "raised an exception" in run.stdout and "ValueError: boom: the dataset path does not exist" in run.stdout
    assert leftovers(tmp_path) == []


def scale_one_to_two(tmp_path, out, steps: int, *script_args: str, runs: int = 2):
    """`gpulint scale --nproc 1,2`, `runs` runs a size, on the DDP fixture with `script_args`."""
    options = f"scale --nproc 1,2 --runs {runs} --steps {steps} --warmup 2".split()
    return gpulint(tmp_path, *options, "--json", str(out), "--", DDP, *script_args, timeout=900)


@pytest.mark.timed
def test_scale_near_linear_fixture(tmp_path):
    out = tmp_path / "scale.json"
    run = scale_one_to_two(tmp_path, out, 8, "--compute-ms", "300")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Verdict: scales" in run.stdout and "near linear" in run.stdout
    record = json.loads(out.read_text())
    efficiency = record["efficiencies"][0]
    assert efficiency["nproc"] == 2 and efficiency["interval"][0] >= 0.9 and efficiency["outcome"] == "near linear"
    assert f"{100 * efficiency['efficiency']:.0f}% ({100 * efficiency['interval'][0]:.0f}%.." in run.stdout
    assert record["throughput_unit"] == "samples/s" and record["order"] == [1, 2, 2, 1]
    with History.open(tmp_path / "history.db", create=False) as history:
        (stored,) = history.runs(kind="scale")
        assert stored.verdict == "scales" and stored.command.startswith("gpulint scale --nproc 1,2 -- ")
        assert stored.figure("efficiency at 2").value == pytest.approx(efficiency["efficiency"])
    assert leftovers(tmp_path) == []


@pytest.mark.timed
def test_scale_communication_bound_fixture(tmp_path):
    out = tmp_path / "scale.json"
    # Three runs a size: with two, one slow run on a loaded machine stretched the interval to
    # 33%..98% around an efficiency of 57%, over the 90% bar ("within noise").
    run = scale_one_to_two(tmp_path, out, 6, *COMMUNICATION_BOUND, runs=3)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Verdict: communication-bound" in run.stdout and "compress gradients" in run.stdout
    record = json.loads(out.read_text())
    efficiency = record["efficiencies"][0]
    assert efficiency["interval"][1] < 0.9 and efficiency["outcome"] == "below"
    assert f"{100 * efficiency['efficiency']:.0f}% ({100 * efficiency['interval'][0]:.0f}%.." in run.stdout
    sizes = record["sizes"]
    assert sizes[1]["collective_wait"] > sizes[0]["collective_wait"]
    assert leftovers(tmp_path) == []


@pytest.mark.timed
def test_batch_size_sweep_measures_out_of_memory_and_recommends(tmp_path):
    out = tmp_path / "sweep.json"
    run = gpulint(
        tmp_path,
        "verify",
        str(SCRIPTS / "batch_sizes.py"),
        "--param",
        "batch_size=32,64,128",
        "--runs",
        "2",
        "--steps",
        "8",
        "--warmup",
        "2",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "set via --batch-size (argparse)" in run.stdout and "out of memory" in run.stdout
    assert "recommended: 64" in run.stdout and "multiply it by 2 (64/32, linear scaling rule)" in run.stdout
    report = json.loads(out.read_text())
    assert [v["out_of_memory"] for v in report["values"]] == [False, False, True]
    assert report["throughput_unit"] == "samples/s" and report["batch_advice"]["recommended"] == "64"
    assert leftovers(tmp_path) == []
