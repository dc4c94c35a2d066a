"""Capacity figures on synthetic runs: MFU and the GPU peak table, memory headroom and batch advice,
the CUDA and NVML paths through fake backends (no GPU here), and the bootstrap's own helpers."""

import sys
import time
import types

import pytest
import torch

from gpulint.runtime_check import bootstrap, compute, gpu_peaks, memory, nvml
from gpulint.runtime_check.figures import Figure, format_value
from gpulint.runtime_check.measure import ProcessRun, RunResult
from tests.runtime.helpers import step_stats

GIB = 2**30


def run_with(
    report: dict,
    step: float = 0.1,
    steps: int = 10,
    samples: int | None = 32 * 10,
    cuda: bool = True,
    gpu: nvml.GpuSummary | None = None,
) -> RunResult:
    stats = step_stats(
        [step] * steps,
        [0.0] * steps,
        warmup=2,
        samples=samples,
        optimizers={"AdamW": steps + 2},
        window=(0.0, step * steps),
    )
    run = RunResult("python train.py", "stopped", 0, 5.0, steps=stats, cuda=cuda, gpu=gpu, instrumented=["torch 2.x"])
    run.processes = [ProcessRun(None, 123, stats, {"flops": None, "memory": None, "ddp": [], **report})]
    return run


def cuda_memory(device="NVIDIA A100-SXM4-80GB", total=80 * GIB, peak=20 * GIB, steady=4 * GIB):
    return {
        "source": "torch.cuda",
        "device": device,
        "total": total,
        "peak_allocated": peak,
        "peak_reserved": peak + GIB,
        "steady_allocated": steady,
    }


# -- GPU peaks and MFU --------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, model",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("NVIDIA A30", "A30"),
    ],
)
def test_gpu_names_find_their_row(name, model):
    assert gpu_peaks.find(name).model == model


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 4090", "AMD Instinct MI300X", "", None])
def test_unlisted_devices_have_no_peak(name):
    peak, why = gpu_peaks.peak_flops(name, "bf16")
    assert peak is None and why


def test_every_listed_peak_is_dense_and_sourced():
    for row in gpu_peaks.PEAKS:
        assert row.source.startswith("NVIDIA datasheet, https://www.nvidia.com/")
        assert set(row.tflops) <= {"fp32", "tf32", "bf16", "fp16", "fp8"}
        if "bf16" in row.tflops and "tf32" in row.tflops:
            assert row.tflops["tf32"] <= row.tflops["bf16"]  # never a sparsity figure mixed in
    assert gpu_peaks.peak_flops("NVIDIA H100 NVL", "bf16")[0] is None  # recognised, deliberately not listed


def test_mfu_from_counted_flops_and_the_a100_bf16_peak():
    run = run_with(
        {"flops": {"total": 3.0e12, "by_math": {"bf16": 3.0e12}, "optimizer": "AdamW"}, "memory": cuda_memory()}
    )
    report = compute.compute_report(run)
    assert report.flops_per_step.value == 3.0e12 and report.device == "NVIDIA A100-SXM4-80GB"
    assert report.achieved.value == pytest.approx(3.0e13)
    assert report.peak.value == pytest.approx(312e12) and "A100 bf16 dense peak 312" in report.peak.note
    assert report.mfu.value == pytest.approx(3.0e13 / 312e12)


def test_mixed_arithmetic_uses_the_time_weighted_peak():
    run = run_with(
        {
            "flops": {"total": 4e12, "by_math": {"bf16": 3e12, "tf32": 1e12}, "optimizer": "AdamW"},
            "memory": cuda_memory(),
        }
    )
    peak = compute.compute_report(run).peak.value
    assert peak == pytest.approx(4e12 / (3e12 / 312e12 + 1e12 / 156e12))


def test_arithmetic_without_a_peak_makes_mfu_not_measured_unless_negligible():
    big = run_with(
        {
            "flops": {"total": 2e12, "by_math": {"bf16": 1e12, "fp64": 1e12}, "optimizer": "AdamW"},
            "memory": cuda_memory(),
        }
    )
    report = compute.compute_report(big)
    assert report.mfu.value is None and "no fp64 peak listed for A100" in report.mfu.note
    small = run_with(
        {
            "flops": {"total": 1e12 + 1e8, "by_math": {"bf16": 1e12, "fp64": 1e8}, "optimizer": "AdamW"},
            "memory": cuda_memory(),
        }
    )
    assert compute.compute_report(small).mfu.value is not None


def test_cpu_run_counts_flops_but_mfu_is_not_measured_with_the_reason():
    run = run_with({"flops": {"total": 2048, "by_math": {"fp32": 2048}, "optimizer": "AdamW"}}, cuda=False)
    report = compute.compute_report(run)
    assert report.flops_per_step.value == 2048 and report.achieved.value == pytest.approx(20480)
    assert report.peak.value is None and report.mfu.value is None
    assert "ran on the CPU" in report.mfu.note and "GPU peaks only" in report.mfu.note


def test_given_flops_need_a_given_peak_and_a_mismatched_optimizer_is_not_counted():
    run = run_with({"memory": cuda_memory()})
    unknown = compute.compute_report(run, flops_per_step=1e12)
    assert unknown.flops_per_step.note == "given with --flops-per-step" and unknown.mfu.value is None
    assert "arithmetic" in unknown.mfu.note
    given = compute.compute_report(run, flops_per_step=1e12, peak_tflops=100)
    assert given.mfu.value == pytest.approx(1e13 / 100e12)
    other = run_with({"flops": {"total": 1e9, "by_math": {"fp32": 1e9}, "optimizer": "SGD"}, "memory": cuda_memory()})
    assert compute.compute_report(other).flops_per_step.value is None  # SGD counted, AdamW paces


def test_flops_error_from_the_child_is_the_reason():
    run = run_with({"flops": {"error": "FLOPs are counted in the second warm-up step: use --warmup 2 or more"}})
    assert "--warmup 2" in compute.compute_report(run).mfu.note


# -- memory headroom ---------------------------------------------------------------------
def test_headroom_from_torch_cuda_memory():
    report = memory.memory_report(run_with({"memory": cuda_memory()}))
    growth = (0.9 * 80 - 4) / (20 - 4)
    assert report.growth == pytest.approx(growth) and not report.growth_is_lower_bound and not report.memory_bound
    figures = {f.name: f for f in report.figures}
    assert figures["device memory peak"].value == 20 * GIB and figures["memory headroom"].value == pytest.approx(0.75)
    assert figures["largest batch (estimate)"].value == int(32 * growth)
    assert "--param batch_size=" in report.advice[0] and "linear scaling rule" in report.advice[0]


def test_memory_bound_run_points_at_accumulation_and_checkpointing():
    report = memory.memory_report(run_with({"memory": cuda_memory(peak=76 * GIB)}))
    assert report.memory_bound and report.growth < 1
    assert "gradient accumulation" in report.advice[0] and "activation checkpointing" in report.advice[0]


def test_the_fullest_rank_limits_the_batch():
    run = run_with({"memory": cuda_memory(peak=10 * GIB)})
    run.processes.append(ProcessRun(1, 124, run.steps, {"memory": cuda_memory(peak=30 * GIB)}))
    assert memory.memory_report(run).figures[0].value == 30 * GIB


def test_cpu_run_has_honest_not_measured_memory_rows():
    report = memory.memory_report(run_with({}, cuda=False))
    assert report.growth is None and not report.advice
    assert all(f.value is None and "ran on the CPU" in f.note for f in report.figures)


def fake_pynvml(used: list[int], total: int = 16 * GIB, name: bytes = b"Tesla T4"):
    """A stand-in for the pynvml module: one device whose used memory follows `used`."""
    readings = iter(used)
    module = types.ModuleType("pynvml")
    module.nvmlInit = lambda: None
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: 1
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetName = lambda handle: name
    module.nvmlDeviceGetUtilizationRates = lambda handle: types.SimpleNamespace(gpu=97)

    def memory_info(handle):
        return types.SimpleNamespace(total=total, used=next(readings, used[-1]))

    module.nvmlDeviceGetMemoryInfo = memory_info
    return module


def test_nvml_path_through_a_fake_backend_gives_a_lower_bound(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([2 * GIB, 8 * GIB, 4 * GIB, 8 * GIB]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = nvml.GpuSampler(interval=0.01).start()
    deadline = time.monotonic() + 60
    while len(sampler.samples) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    summary = nvml.summarize(sampler, None, None)
    assert summary.devices == ["Tesla T4"] and summary.mem_peak_fraction == pytest.approx(0.5)
    # TensorFlow on that GPU: its peak but no total, so NVML's whole-device figure is used.
    run = run_with(
        {
            "memory": {
                "source": "tensorflow",
                "device": None,
                "total": None,
                "peak_allocated": 8 * GIB,
                "peak_reserved": None,
                "steady_allocated": None,
            }
        },
        gpu=summary,
    )
    report = memory.memory_report(run)
    assert report.growth_is_lower_bound and report.growth == pytest.approx(0.9 / 0.5)
    assert "NVML" in report.figures[0].note
    assert compute.device_name(run) == ("Tesla T4", "")


def test_out_of_memory_is_recognised():
    oom = RunResult("cmd", "error", 1, 1.0, error={"type": "OutOfMemoryError", "message": "CUDA out of memory."})
    tf = RunResult("cmd", "error", 1, 1.0, error={"type": "ResourceExhaustedError", "message": "OOM when allocating"})
    other = RunResult("cmd", "error", 1, 1.0, error={"type": "ValueError", "message": "bad shape"})
    assert memory.is_out_of_memory(oom) and memory.is_out_of_memory(tf) and not memory.is_out_of_memory(other)


# -- batch-size advice -------------------------------------------------------------------
def test_largest_efficient_batch_with_the_learning_rate_rule():
    sizes = [
        memory.SizeResult("32", 1000.0, False),
        memory.SizeResult("64", 1800.0, False),
        memory.SizeResult("128", 1850.0, False),
        memory.SizeResult("256", None, True),
    ]
    advice = memory.batch_advice(sizes, "32")
    assert advice.recommended == "128"
    text = "\n".join(advice.lines)
    assert "multiply it by 4 (128/32, linear scaling rule)" in text and "warm-up" in text
    assert "out of memory at 256 (measured)" in text and "gradient accumulation" in text


def test_a_flat_throughput_recommends_the_largest_size_within_five_percent():
    sizes = [
        memory.SizeResult("32", 1000.0, False),
        memory.SizeResult("64", 1960.0, False),
        memory.SizeResult("128", 2000.0, False),
    ]
    assert memory.batch_advice(sizes, None).recommended == "128"
    sizes[2] = memory.SizeResult("128", 1850.0, False)  # slower than 64 by more than 5%
    advice = memory.batch_advice(sizes, None)
    assert advice.recommended == "64" and memory.LR_RULE in advice.lines


def test_every_size_out_of_memory():
    advice = memory.batch_advice([memory.SizeResult("64", None, True), memory.SizeResult("128", None, True)], "64")
    assert advice.recommended is None and "out of memory" in advice.lines[0]


# -- bootstrap helpers through fakes -----------------------------------------------------
def test_cuda_memory_through_a_fake_torch():
    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            is_initialized=lambda: True,
            current_device=lambda: 0,
            get_device_name=lambda device: "NVIDIA H100 PCIe",
            get_device_properties=lambda device: types.SimpleNamespace(total_memory=80 * GIB),
            max_memory_allocated=lambda device: 30 * GIB,
            max_memory_reserved=lambda device: 32 * GIB,
        )
    )
    figures = bootstrap._cuda_memory(fake, 6 * GIB)
    assert figures == {
        "source": "torch.cuda",
        "device": "NVIDIA H100 PCIe",
        "total": 80 * GIB,
        "peak_allocated": 30 * GIB,
        "peak_reserved": 32 * GIB,
        "steady_allocated": 6 * GIB,
    }
    fake.cuda.is_initialized = lambda: False
    assert bootstrap._cuda_memory(fake, None) is None


def test_arithmetic_names_follow_dtype_and_tf32_settings(monkeypatch):
    assert bootstrap._math_of(torch, torch.bfloat16, False) == "bf16"
    assert bootstrap._math_of(torch, torch.float16, True) == "fp16"
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert bootstrap._math_of(torch, torch.float32, False) == "fp32"
        torch.set_float32_matmul_precision("high")
        assert bootstrap._math_of(torch, torch.float32, False) == "tf32"
    finally:
        torch.set_float32_matmul_precision(previous)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert bootstrap._math_of(torch, torch.float32, True) == "fp32"


def test_flop_counter_counts_a_step_by_arithmetic():
    counter = bootstrap._flop_counter()
    model = torch.nn.Linear(64, 32)
    with counter:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(torch.randn(8, 64))
        out.float().sum().backward()
    forward = 2 * 8 * 64 * 32
    assert counter.get_total_flops() == 2 * forward  # forward and the weight gradient (no input gradient)
    assert counter.by_math == {"bf16": 2 * forward}


def test_batch_samples_from_common_batch_shapes():
    x = torch.zeros(16, 3)
    assert bootstrap._batch_samples((x, torch.zeros(16))) == 16
    assert bootstrap._batch_samples({"input_ids": torch.zeros(4, 128), "labels": [1, 2]}) == 4
    assert bootstrap._batch_samples([["a", "b"]]) is None and bootstrap._batch_samples(None) is None


def test_figures_format_units():
    assert format_value(None, "flop/s") == "not measured"
    assert format_value(3.2e14, "flop/s") == "320.00 TFLOP/s" and format_value(0.4123, "share") == "41.2%"
    assert format_value(20 * GIB, "bytes") == "20.0 GiB" and format_value(0.0123, "s") == "12.3 ms"
    with pytest.raises(ValueError):
        Figure("x", 1.0, "furlongs")
