"""Sampled stacks -> phases (attribution.py) and the verdict by share (verdict.decide), on
synthetic measurements: each case is one the verdict used to get wrong."""

from __future__ import annotations

import textwrap

from gpulint.runtime_check import attribution
from gpulint.runtime_check.nvml import GpuSummary
from gpulint.runtime_check.profile import host_work
from gpulint.runtime_check.verdict import MIN_PHASE_LOOKS, Measurements, decide
from tests.runtime.helpers import measured_run

TRAIN = textwrap.dedent(
    """\
    def save(model):
        torch.save(model.state_dict(), "ckpt.pt")

    def validate(model, loader):
        model.eval()
        with torch.no_grad():
            for x, y in loader:
                model(x)

    def main():
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            save(model)
            validate(model, val_loader)
            log.write(str(step))
            os.fsync(log.fileno())
            values = loss.tolist()
    """
)


def report(path: str, stacks: list[tuple[str, list, int]]) -> dict:
    main = [path, 10, 10]  # main's frame; its line is replaced per stack
    return {
        "stacks": {
            "interval": 0.005,
            "looks": len(stacks),
            "seconds": sum(n for _, _, n in stacks),
            "lost": 0,
            "stacks": [{"fetch": fetch, "frames": frames, "seconds": n} for fetch, frames, n in stacks],
        },
        "step_functions": [[main[0], 10, "main"]],
    }


def at(path: str, line: int, first: int = 10) -> list:
    return [path, line, first]


def test_each_phase_is_found_with_its_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    path = str(script)
    result = attribution.attribute(
        report(
            path,
            [
                ("train", [at(path, 11), "data"], 10),
                ("", [at(path, 12), "forward"], 20),
                ("", [at(path, 13), "backward"], 20),
                ("", [at(path, 15), at(path, 2, 1), "torch.save"], 15),
                ("eval", [at(path, 16), at(path, 7, 4), "data"], 5),
                ("", [at(path, 16), at(path, 8, 4), "forward"], 10),
                ("", [at(path, 18)], 12),
                ("", [at(path, 19)], 8),
            ],
        )
    )
    assert result is not None and result.looks == 8
    shares = {p.name: round(p.share, 2) for p in result.phases}
    assert shares == {
        "compute": 0.40,
        "validation": 0.15,  # the validation loader's fetch and forward under no_grad
        "checkpoint writes": 0.15,
        "logging": 0.12,
        "data wait": 0.10,
        "host sync": 0.08,
    }
    checkpoint = result.phase("checkpoint writes")
    assert checkpoint is not None and checkpoint.rule == "GL303"
    assert checkpoint.lines[0].where == f"{path}:15" and checkpoint.lines[0].text == "save(model)"
    assert checkpoint.lines[0].inner_text == 'torch.save(model.state_dict(), "ckpt.pt")'
    assert result.phase("validation").lines[0].text == "validate(model, val_loader)"
    assert result.phase("logging").lines[0].text == "os.fsync(log.fileno())"
    assert result.host_shares == {"validation": 0.15, "checkpoint writes": 0.15, "logging": 0.12, "host sync": 0.08}


MOCO = textwrap.dedent(
    """\
    class MoCo(nn.Module):
        def forward(self, im_q, im_k):
            q = self.encoder_q(im_q)
            with torch.no_grad():
                k = self.encoder_k(im_k)
            return q @ k.T

    def main():
        for x, y in loader:
            logits = model(x, y)
            logits.sum().backward()
            optimizer.step()
    """
)


def test_no_grad_inside_the_model_is_compute_not_validation(tmp_path):
    """MoCo's key encoder runs under no_grad inside the model's forward, in every training step:
    it read as 19-22% validation, with "validate at intervals" as a fix, in the real script."""
    script = tmp_path / "moco.py"
    script.write_text(MOCO)
    path = str(script)
    result = attribution.attribute(
        report(
            path,
            [
                ("", [at(path, 11, 9), "forward", at(path, 3, 2), "forward"], 20),
                ("", [at(path, 11, 9), "forward", at(path, 5, 2), "forward"], 20),
                ("", [at(path, 12, 9), "backward"], 40),
            ],
        )
        | {"step_functions": [[path, 9, "main"]]}
    )
    assert result is not None
    assert {p.name: round(p.share, 2) for p in result.phases} == {"compute": 1.0}


def test_no_samples_is_no_attribution():
    assert attribution.attribute({"stacks": None}) is None
    assert attribution.attribute({"stacks": {"seconds": 0, "looks": 0, "stacks": [], "interval": 0.005}}) is None


def m(**fields) -> Measurements:
    base = {"framework": "torch", "steps": 50, "step_median": 0.1, "data_share": 0.0}
    return Measurements(**{**base, **fields})


def test_per_step_checkpoint_is_host_bound_not_compute_bound():
    """A per-step torch.save taking 78% of the step used to read as compute-bound with an effective
    compute share of 99.6% and torch.compile as the fix."""
    verdict = decide(m(data_share=0.004, host_shares={"checkpoint writes": 0.78}))
    assert verdict.headline == "host-bound (checkpoint writes)"
    assert verdict.compute_share is not None and verdict.compute_share < 0.25
    assert verdict.recommendations[0].code == "GL303"
    assert "ceiling 4.5x" in verdict.recommendations[0].expected_gain
    assert "not waiting" not in verdict.advice


def test_the_largest_share_names_the_bottleneck():
    """41% collective wait beside 10% data wait is communication-bound, and the data wait is still said."""
    verdict = decide(m(data_share=0.10, collective_share=0.41))
    assert verdict.kind == "communication-bound"
    assert any("all-reduce" in r for r in verdict.reasons)
    assert any(r.startswith("also:") and "loader" in r for r in verdict.reasons)


def test_a_straggler_is_not_communication():
    """Rank 1 works 24 ms more per step; the others wait for it at the all-reduce."""
    verdict = decide(
        m(collective_share=0.40, straggler_rank=1, straggler_share=0.38, straggler_note="its other host work ...")
    )
    assert verdict.kind == "straggler" and verdict.severity == "rank 1"
    assert "balance the work: rank 1 does 38.0 ms a step (38%) more work" in verdict.advice
    assert not any("bucket" in r.action for r in verdict.recommendations)


def test_workers_gain_is_bounded_by_the_cores():
    """98.6% data wait on 2 cores with no workers: 2.0x at most, not the 70.9x Amdahl ceiling."""
    verdict = decide(m(data_share=0.986, loader={"num_workers": 0, "persistent_workers": False}, cores=2))
    first = verdict.recommendations[0]
    assert first.code == "GL101" and first.expected_gain.startswith("at most 2.0x")
    assert "GL103" not in [r.code for r in verdict.recommendations]  # no workers to keep alive


def test_workers_are_not_suggested_when_every_core_has_one():
    verdict = decide(m(data_share=0.5, loader={"num_workers": 8, "persistent_workers": False}, cores=8))
    assert [r.code for r in verdict.recommendations][:1] == ["GL103"]


def test_each_phase_counts_the_looks_that_saw_it(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    path = str(script)
    stacks = [("", [at(path, 12), "forward"], 20), ("", [at(path, 13), "backward"], 20), ("", [at(path, 18)], 12)]
    counted = report(path, stacks)
    for stack, looks in zip(counted["stacks"]["stacks"], (7, 5, 1), strict=True):
        stack["looks"] = looks
    result = attribution.attribute(counted)
    assert result is not None
    assert {p.name: p.looks for p in result.phases} == {"compute": 12, "logging": 1}
    assert result.host_looks == {"logging": 1}
    older = attribution.attribute(report(path, stacks))  # (a report from before the looks were counted)
    assert older is not None and {p.looks for p in older.phases} == {None} and older.host_looks == {}


def test_host_work_seen_in_too_few_looks_is_said_not_named():
    """On a loaded machine one late look carries all the time since the one before: 11% of a short
    CPU run's step put on its own compute line, seen once, made a healthy run "host-bound"."""
    shares = {"other host work": 0.11}
    lines = {"other host work": "train.py:50 `loss = nn.functional.mse_loss(model(x), y)`"}
    once = decide(m(data_share=0.01, host_shares=shares, host_lines=lines, host_looks={"other host work": 1}))
    assert once.kind == "compute-bound", (once.headline, once.reasons)
    assert any("in only 1 look at the stack: too few to name it" in r and "train.py:50" in r for r in once.reasons)
    often = decide(m(data_share=0.01, host_shares=shares, host_looks={"other host work": MIN_PHASE_LOOKS}))
    assert often.headline == "compute-bound; secondary: other host work 11%"  # seen enough, smaller than compute
    most = {"other host work": 0.6}
    often = decide(m(data_share=0.01, host_shares=most, host_looks={"other host work": MIN_PHASE_LOOKS}))
    assert often.headline == "host-bound (other host work)"
    uncounted = decide(m(data_share=0.01, host_shares=most))  # (looks not counted: the share decides)
    assert uncounted.headline == "host-bound (other host work)"


def test_small_host_work_leaves_the_step_compute_bound():
    verdict = decide(m(data_share=0.01, host_shares={"other host work": 0.04, "logging": 0.03}))
    assert verdict.kind == "compute-bound"
    assert verdict.compute_share is not None and abs(verdict.compute_share - 0.92) < 1e-9


def test_on_cuda_a_host_read_is_the_device_compute_unless_the_gpu_is_starved():
    """`.item()` on CUDA waits for the step's kernels: that wait is compute, not host work."""
    phases = [attribution.Phase("compute", 0.5), attribution.Phase("host sync", 0.4), attribution.Phase("logging", 0.1)]
    found = attribution.Attribution(100, 0.002, phases)
    assert host_work(found, measured_run([0.1] * 5)) == {"host sync": 0.4, "logging": 0.1}
    assert host_work(found, measured_run([0.1] * 5, cuda=True)) == {"logging": 0.1}  # GPU not measured
    starved = measured_run([0.1] * 5, cuda=True)
    starved.gpu = GpuSummary(
        devices=["GPU"],
        samples=10,
        util_mean=30.0,
        util_median=30.0,
        util_p10=0.0,
        idle_fraction=0.5,
        mem_peak_fraction=0.1,
        series=[],
    )
    assert host_work(found, starved) == {"host sync": 0.4, "logging": 0.1}


def test_the_sampler_keeps_the_user_frames_of_the_watched_thread(monkeypatch, tmp_path):
    """bootstrap.StackSampler in process: a thread busy in this file is seen there, by line, with
    the time of the looks adding up to about the time watched."""
    import threading
    import time

    from gpulint.runtime_check import bootstrap

    monkeypatch.setattr(bootstrap, "STATE", bootstrap.State({"out": str(tmp_path / "o.json"), "warmup": 1}))
    done = threading.Event()

    def busy():
        while not done.is_set():
            time.sleep(0.001)  # the line the sampler should see

    worker = threading.Thread(target=busy)
    worker.start()
    started = bootstrap.clock()
    sampler = bootstrap.StackSampler(worker.ident, interval=0.002).start()
    time.sleep(0.3)
    deadline = time.monotonic() + 60  # (a loaded machine may give the sampler fewer looks meanwhile)
    while sampler.looks < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    watched = bootstrap.clock() - started
    done.set()
    worker.join()
    result = sampler.result()
    assert result["looks"] >= 10 and 0.5 * watched < result["seconds"] <= watched
    assert sum(stack["looks"] for stack in result["stacks"]) == result["looks"]  # (nothing lost here)
    lines = {frame[1] for stack in result["stacks"] for frame in stack["frames"] if isinstance(frame, list)}
    files = {frame[0] for stack in result["stacks"] for frame in stack["frames"] if isinstance(frame, list)}
    assert files == {__file__} and len(lines) <= 3


def test_printing_a_tensor_is_logging_not_compute(tmp_path):
    """f"{loss}" runs torch/_tensor.py's __format__: that is not the backward pass."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN.replace("log.write(str(step))", 'print(f"loss {loss}")'))
    path = str(script)
    result = attribution.attribute(
        report(path, [("", [at(path, 18), "tensor"], 0.6), ("", [at(path, 13), "backward"], 0.4)])
    )
    assert result is not None and result.share("logging") == 0.6 and result.share("compute") == 0.4


def test_a_new_iterator_starting_its_workers_is_loader_start_up(tmp_path):
    """Forking a loader's workers runs logging's fork hooks under the `for` line, and spawning them
    pickles the dataset: both are the loader starting, not logging (GL302) or a checkpoint (GL303).
    A profile on an H200 named 6% of the step "logging" at the loop's `for` this way."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    path = str(script)
    stacks = [
        ("", [at(path, 11), "data", "logging"], 0.3),
        ("", [at(path, 11), "data", "pickle"], 0.2),
        ("", [at(path, 17), "logging"], 0.5),
    ]
    result = attribution.attribute(report(path, stacks))
    assert result is not None
    assert result.share("loader start-up") == 0.5 and result.share("logging") == 0.5
    assert result.phase("loader start-up").rule == "GL103"
    assert result.phase("logging").lines[0].text == "log.write(str(step))"


def test_a_statement_over_several_lines_is_judged_whole(tmp_path):
    """The thread is on the second line of a log write that reads the weights with .tolist(): it
    is logging (the statement writes), named by the statement's first line."""
    script = tmp_path / "train.py"
    script.write_text(
        "def main():\n"
        "    for x in loader:\n"
        "        log.write(\n"
        '            " ".join(f"{v}" for v in w.tolist())\n'
        "        )\n"
    )
    path = str(script)
    stacks = {
        "interval": 0.002,
        "looks": 1,
        "seconds": 1.0,
        "stacks": [{"fetch": "", "frames": [[path, 4, 1], [path, 4, 4]], "seconds": 1.0}],
    }
    result = attribution.attribute({"stacks": stacks, "step_functions": [[path, 1, "main"]]})
    assert result is not None and result.share("logging") == 1.0
    line = result.phases[0].lines[0]
    assert line.where == f"{path}:3" and line.text.startswith('log.write( " ".join(')
