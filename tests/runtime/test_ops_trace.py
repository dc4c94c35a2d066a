"""`gpulint profile --ops` and `--trace`: the operator kinds, the method's two readings, the steps
profiled after the measured ones (in process, on a fed clock), the trace file written safely, and
end to end on the ground-truth script: the operator table printed and the trace loaded.

"Loaded" means what a viewer does with the file: the Chrome DevTools Performance panel's trace
engine (bundled in Chromium, run headless: tests/runtime/browser.load_trace) parses every event,
builds each thread's slices and call tree, and the test reads back the tracks it would draw.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from gpulint.linter.run.safe_files import OutputFile, WriteRefused, write_output_file
from gpulint.runtime_check import bootstrap
from gpulint.runtime_check import operators as ops_mod
from gpulint.runtime_check.measure import analyze_steps
from tests.runtime.browser import find_chromium, load_trace
from tests.runtime.test_runs import ROOT, gpulint
from tests.runtime.test_units import Child

GROUND_TRUTH = ROOT / "tests" / "runtime" / "ground_truth" / "train.py"
CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (apt-get install chromium, or set CHROMIUM)"
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("aten::addmm", ops_mod.MATMUL_CONV),
        ("aten::mm", ops_mod.MATMUL_CONV),
        ("aten::conv2d", ops_mod.MATMUL_CONV),
        ("aten::convolution_backward", ops_mod.MATMUL_CONV),
        ("ampere_sgemm_128x64_tn", ops_mod.MATMUL_CONV),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)", ops_mod.MATMUL_CONV),
        ("aten::_scaled_dot_product_flash_attention", ops_mod.MATMUL_CONV),
        ("aten::copy_", ops_mod.COPIES),
        ("aten::_to_copy", ops_mod.COPIES),
        ("aten::cat", ops_mod.COPIES),
        ("Memcpy HtoD (Pageable -> Device)", ops_mod.COPIES),
        ("aten::add_", ops_mod.ELEMENTWISE),
        ("aten::relu", ops_mod.ELEMENTWISE),
        ("aten::threshold_backward", ops_mod.ELEMENTWISE),
        ("aten::_foreach_add_", ops_mod.ELEMENTWISE),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", ops_mod.ELEMENTWISE),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ops_mod.DATA_LOADER),
        ("c10d::allreduce_", ops_mod.COLLECTIVES),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ops_mod.COLLECTIVES),
        ("aten::sum", ops_mod.OTHER),
        ("aten::native_layer_norm", ops_mod.OTHER),
        ("aten::addcmulx", ops_mod.OTHER),  # a name that only starts like an elementwise one
    ],
)
def test_operators_are_sorted_into_kinds_by_name(name, kind):
    assert ops_mod.kind_of(name) == kind


def _report(operators, steps, fetches=(), device=False, outside=0.0):
    """A process report holding a profiled window, as bootstrap.OpsWindow writes it."""
    rows = [{"name": n, "calls": 1, "self_cpu": cpu, "self_device": dev} for n, cpu, dev in operators]
    return {
        "fetches": len(fetches),
        "ops": {
            "wanted": len(steps),
            "first_step": 8,
            "steps": steps,
            "fetches": list(fetches),
            "stacks": None,
            "operators": rows,
            "totals": {
                "self_cpu": sum(r["self_cpu"] for r in rows),
                "self_device": sum(r["self_device"] for r in rows),
                "rows": len(rows),
                "outside_operators": outside,
            },
            "device": device,
            "torch_trace": None,
            "clock_offset": 1000.0,
            "error": None,
        },
    }


def test_a_dataloader_over_a_fifth_of_the_step_reads_fix_the_input_pipeline():
    steps = [[0.0, 1.0], [1.0, 2.0]]
    report = _report([("aten::addmm", 0.2, 0.0), ("aten::add_", 0.1, 0.0)], steps, [[0.0, 0.3], [1.0, 1.3]])
    ops = ops_mod.ops_report(report, measured=5)
    assert ops.steps == [8, 9] and ops.step_time == pytest.approx(1.0) and ops.data_share == pytest.approx(0.3)
    assert "fix the input pipeline" in ops.readings[0]
    assert "not the limit" in ops.readings[1]  # matmuls: 0.2 s of 2 s
    fine = ops_mod.ops_report(_report([("aten::addmm", 0.2, 0.0)], steps, [[0.0, 0.1], [1.0, 1.1]]), 5)
    assert "not what limits" in fine.readings[0]


def test_a_few_big_matmuls_filling_the_step_read_as_the_hardware_limit():
    operators = [("aten::addmm", 0.9, 0.0), ("aten::mm", 0.5, 0.0), ("aten::bmm", 0.01, 0.0), ("aten::add_", 0.2, 0.0)]
    ops = ops_mod.ops_report(_report(operators, [[0.0, 1.0], [1.0, 2.0]]), measured=5)
    assert ops.readings[1].startswith("2 matmul/convolution operators take 70%")
    assert "more GPUs or a smaller model, not code fixes" in ops.readings[1]
    assert ops.kinds_cpu[ops_mod.MATMUL_CONV] == pytest.approx(1.41 / 1.61)
    assert ops.kinds_cpu[ops_mod.ELEMENTWISE] == pytest.approx(0.2 / 1.61)
    assert sum(ops.kinds_cpu.values()) == pytest.approx(1.0)


def test_on_a_gpu_the_readings_use_device_time():
    # The host launches the matmuls in no time; the device spends 80% of the step in them.
    operators = [("aten::addmm", 0.01, 0.0), ("ampere_sgemm_128x64_tn", 0.0, 1.6), ("aten::add_", 0.3, 0.1)]
    ops = ops_mod.ops_report(_report(operators, [[0.0, 1.0], [1.0, 2.0]], device=True), measured=5)
    assert "80% of the profiled steps' device time" in ops.readings[1]
    header, rows = ops_mod.table_rows(ops)
    assert header == ["operator", "calls", "self CPU", "CPU share", "self CUDA", "CUDA share", "kind"]
    assert rows[0][0] == "ampere_sgemm_128x64_tn"  # by device time


def test_the_profiled_steps_follow_the_measured_ones_of_a_tf_loop(monkeypatch, tmp_path):
    """A tf.data loop: the measured steps are timed as without --ops, then two more are recorded
    (one profiler warm-up step first); torch.profiler is said not to apply, the phases remain."""
    child = Child(monkeypatch)
    child.state.config.update(steps=2, ops={"steps": 2, "trace": True})
    child.state.out = str(tmp_path / "result.json")
    child.state.steps_wanted = 2
    for start in (0.0, 1.0, 2.0):  # a step ends as the next batch is asked for: 1.0 (warm-up), 2.0
        child.tf_fetch(start, start + 0.1)
    child.at(3.0).state.tf_fetch_start(3.0)  # ends the second measured step: the window opens
    with pytest.raises(bootstrap.StopProfiling):
        # fetches of 0.25 s; steps end at 4.5 (the profiler's warm-up step), 6.0 and 8.0
        for start, next_start in ((3.0, 4.5), (4.5, 6.0), (6.0, 8.0)):
            child.at(start + 0.25).state.tf_fetch_end(start, True)
            child.at(next_start).state.tf_fetch_start(next_start)
    result = child.state.result("stopped", 0, None)
    steps = analyze_steps(result)
    assert steps.count == 2 and steps.times == pytest.approx([1.0, 1.0])  # the window is not measured
    window = result["ops"]
    assert window["first_step"] == 5 and window["steps"] == [[4.5, 6.0], [6.0, 8.0]]
    assert window["fetches"] == [[4.5, 4.75], [6.0, 6.25]]
    assert "TensorFlow" in window["error"] and window["operators"] is None
    ops = ops_mod.ops_report(result, steps.count)
    assert ops.steps == [5, 6] and ops.data_share == pytest.approx(0.5 / 3.5)
    document = ops_mod.trace_document(result)
    slices = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["step 5", "step 6", "data wait", "data wait"]
    assert slices[0]["ts"] == 0 and slices[0]["dur"] == 1_500_000 and slices[1]["ts"] == 1_500_000


def test_the_trace_replaces_a_file_but_never_writes_through_a_link(tmp_path):
    trace = tmp_path / "trace.json"
    write_output_file(trace, b"old")
    write_output_file(trace, b"new")
    assert trace.read_bytes() == b"new"
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(WriteRefused, match="symbolic link"):
        write_output_file(link, b"trace")
    assert target.read_bytes() == b"keep" and link.is_symlink()
    os.mkdir(tmp_path / "folder.json")
    with pytest.raises(WriteRefused, match="directory"):
        write_output_file(tmp_path / "folder.json", b"trace")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.json", "link.json", "precious", "trace.json"]


def test_profile_refuses_a_trace_link_before_running_the_script(tmp_path):
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    (tmp_path / "trace.json").symlink_to(target)
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = gpulint(tmp_path, "profile", "--trace", str(tmp_path / "trace.json"), "--", "python", str(script))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "symbolic link" in result.stderr
    assert not marker.exists() and target.read_bytes() == b"keep"


def test_profile_help_lists_the_operator_options(tmp_path):
    result = gpulint(tmp_path, "profile", "--help")
    assert result.returncode == 0
    for option in ("--ops ", "--trace FILE", "--ops-steps N"):
        assert option in result.stdout


def _profile(tmp_path, bottleneck: str, *options: str):
    return gpulint(
        tmp_path,
        "profile",
        "--steps",
        "3",
        "--warmup",
        "2",
        "--ops-steps",
        "2",
        "--no-history",
        *options,
        "--",
        "python",
        str(GROUND_TRUTH),
        env={"GT_BOTTLENECK": bottleneck, "GT_TIMERS": str(tmp_path / "timers.json")},
    )


@pytest.mark.slow
def test_ops_prints_the_operator_table_of_a_starved_loop(tmp_path):
    result = _profile(tmp_path, "loader", "--ops", "--json", str(tmp_path / "profile.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # 2 warm-up + 3 measured steps, one profiler warm-up step (6), then steps 7 and 8
    assert "Operators of steps 7-8 (profiled after the 3 measured steps" in out
    table = out[out.index("Operators of") :]
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in table
    assert "aten::addmm" in table and "matmul/conv" in table
    assert "By kind, share of operator self CPU time: matmul/conv " in table
    assert "Reading: fetching batches (DataLoader, tf.data) takes" in table and "fix the input pipeline" in table
    saved = json.loads((tmp_path / "profile.json").read_text())
    assert saved["ops"]["steps"] == [7, 8] and saved["steps"]["measured"] == 3
    assert saved["ops"]["kinds_cpu"]["DataLoader"] > 0.2
    # the script's own timers: 2 + 3 steps measured by gpulint, then 1 + 2 profiled
    assert json.loads((tmp_path / "timers.json").read_text())["steps"] == 8


@pytest.mark.slow
@needs_chromium
def test_the_trace_of_a_checkpointing_loop_loads_with_its_phases_and_operators(tmp_path):
    trace = tmp_path / "trace.json"
    result = _profile(tmp_path, "checkpoint", "--trace", str(trace))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"wrote the trace of steps 7-8 to {trace}" in result.stdout
    assert "Operators of" not in result.stdout  # the table only with --ops

    loaded = load_trace(CHROMIUM, trace.read_text())
    assert loaded["errors"] == []
    tracks = {(t["pid"], t["name"]): t for t in loaded["threads"]}
    ours = ops_mod.GPULINT_PID
    steps = tracks[(ours, "steps")]["slices"]
    assert [s["name"] for s in steps] == ["step 7", "step 8"]
    for name in ("steps", "data wait", "phases (sampled stack)"):
        track = tracks[(ours, name)]
        assert track["roots"] == len(track["slices"]) > 0  # side by side, none drawn inside another
    phases = tracks[(ours, "phases (sampled stack)")]["slices"]
    assert "checkpoint writes" in {p["name"] for p in phases}
    first, last = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    assert all(first <= s["ts"] and s["ts"] + s["dur"] <= last for s in phases)
    for fetch in tracks[(ours, "data wait")]["slices"]:
        assert any(s["ts"] <= fetch["ts"] and fetch["ts"] + fetch["dur"] <= s["ts"] + s["dur"] for s in steps)
    # torch's operators, on the training thread, on the same time axis as the phases: each of
    # torch's ProfilerStep#k ends right after the checker's step (the hook runs right before it:
    # about 0.1 ms, more where the machine is busy and takes the core away in between)
    python = next(t for t in loaded["threads"] if t["pid"] != ours and "python" in (t["name"] or ""))
    names = {s["name"] for s in python["slices"]}
    assert {"aten::addmm", "aten::mm"} <= names
    profiler_steps = sorted(
        (s for s in python["slices"] if s["name"].startswith("ProfilerStep#")), key=lambda s: s["ts"]
    )
    assert len(profiler_steps) == len(steps)
    for ours, torchs in zip(steps, profiler_steps, strict=True):
        assert -1 <= (torchs["ts"] + torchs["dur"]) - (ours["ts"] + ours["dur"]) < ours["dur"] / 4
    assert loaded["min"] <= first and last <= loaded["max"]
    # the file is torch's trace with the phases added: its own keys are kept
    document = json.loads(trace.read_text())
    assert document["schemaVersion"] == 1 and "baseTimeNanoseconds" in document


@pytest.mark.slow
@needs_chromium
def test_the_phases_alone_load_when_torch_did_not_profile(monkeypatch, tmp_path):
    """A TensorFlow loop's trace (no torch.profiler events) is still a trace a viewer opens."""
    child = Child(monkeypatch)
    child.state.config.update(ops={"steps": 1, "trace": True})
    child.state.out = str(tmp_path / "result.json")
    child.state.steps_wanted = 1
    with pytest.raises(bootstrap.StopProfiling):
        for start in (0.0, 1.0, 2.0, 3.0, 4.0):  # warm-up, one measured step, profiler warm-up, step 4
            child.tf_fetch(start, start + 0.25)
    document = ops_mod.trace_document(child.state.result("stopped", 0, None))
    path = tmp_path / "trace.json"
    ops_mod.write_trace(OutputFile.checked(path), document)
    loaded = load_trace(CHROMIUM, Path(path).read_text())
    assert loaded["errors"] == [] and loaded["generic"]
    tracks = {t["name"]: t for t in loaded["threads"] if t["pid"] == ops_mod.GPULINT_PID}
    assert [s["name"] for s in tracks["steps"]["slices"]] == ["step 4"]
    assert [(s["ts"], s["dur"]) for s in tracks["data wait"]["slices"]] == [(0, 250_000)]


def test_a_script_that_ends_with_its_measured_steps_says_none_was_profiled(monkeypatch):
    child = Child(monkeypatch)
    child.state.config.update(ops={"steps": 2, "trace": False})
    for now in (1.0, 2.0, 3.0):  # the script ends by itself before the measured steps are done
        child.step(now)
    ops = ops_mod.ops_report(child.state.result("finished", 0, None), measured=2)
    assert ops.steps == [] and "none was left to profile" in ops.note


def test_an_operator_named_by_the_users_code_prints_as_one_line():
    report = _report([("step\n::error ::forged\x1b[31m", 1.0, 0.0)], [[0.0, 1.0]])
    _, rows = ops_mod.table_rows(ops_mod.ops_report(report, measured=1))
    assert rows[0][0] == "step\\n::error ::forged\\x1b[31m"


@pytest.mark.slow
def test_every_rank_runs_the_profiled_steps_under_torchrun(tmp_path):
    """All ranks profile the same steps (a rank that stopped early would leave the others waiting
    in an all-reduce); the first rank's operators and trace are reported, and torch's trace files
    in the run's folder are never taken for a rank's report."""
    trace = tmp_path / "trace.json"
    result = gpulint(
        tmp_path,
        "profile",
        "--steps",
        "2",
        "--warmup",
        "2",
        "--ops",
        "--ops-steps",
        "1",
        "--trace",
        str(trace),
        "--no-history",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(GROUND_TRUTH),
        env={"GT_BOTTLENECK": "healthy", "GT_TIMERS": str(tmp_path / "timers.json")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Operators of step 6 (profiled after the 2 measured steps" in result.stdout
    assert "c10d::allreduce_" in result.stdout and "collectives" in result.stdout
    for rank in (0, 1):  # 2 warm-up + 2 measured + 1 profiler warm-up + 1 profiled
        assert json.loads((tmp_path / f"timers.json.rank{rank}").read_text())["steps"] == 6
    document = json.loads(trace.read_text())
    steps = [e["name"] for e in document["traceEvents"] if e.get("pid") == ops_mod.GPULINT_PID and e["ph"] == "X"]
    assert "step 6" in steps


def test_keras_fit_batches_are_profiled_steps_too(monkeypatch):
    child = Child(monkeypatch)
    child.state.config.update(ops={"steps": 1, "trace": False})
    child.state.steps_wanted = 1
    with pytest.raises(bootstrap.StopProfiling):
        for now in (1.0, 2.0, 3.0, 4.5):  # warm-up, one measured batch, profiler warm-up, the profiled batch
            child.at(now).state.keras_batch_end()
    result = child.state.result("stopped", 0, None)
    assert analyze_steps(result).times == pytest.approx([1.0])
    assert result["ops"]["steps"] == [[3.0, 4.5]] and result["ops"]["first_step"] == 4
    assert "TensorFlow" in result["ops"]["error"]
