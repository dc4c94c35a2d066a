"""The verdict on synthetic measurements: every threshold of docs/method.md, both sides of it."""

import pytest

from gpulint.runtime_check.verdict import Measurements, decide, micro_batches


def m(**overrides):
    base = dict(framework="torch", steps=20, step_median=0.1, step_cv=0.05, data_share=0.0)
    base.update(overrides)
    return Measurements(**base)


@pytest.mark.parametrize(
    "share, kind, severity, secondary",
    [
        (0.0, "compute-bound", None, []),
        (0.049, "compute-bound", None, []),
        # over the input threshold but under the compute share: secondary, not the verdict
        (0.05, "compute-bound", None, [("input", 0.05)]),
        (0.199, "compute-bound", None, [("input", 0.199)]),
        (0.49, "compute-bound", None, [("input", 0.49)]),
        (0.5, "input-bound", "high", []),
        (0.9, "input-bound", "high", []),
    ],
)
def test_input_bound_only_when_the_wait_dominates(share, kind, severity, secondary):
    verdict = decide(m(data_share=share))
    assert (verdict.kind, verdict.severity, verdict.secondary) == (kind, severity, secondary)


def test_moderate_input_when_another_wait_shrinks_compute():
    verdict = decide(m(data_share=0.19, host_shares={"checkpoint writes": 0.11, "logging": 0.1}, host_looks={}))
    assert verdict.compute_share == pytest.approx(0.6)
    assert verdict.kind == "compute-bound"  # 19% input beside 60% compute
    assert decide(m(data_share=0.19, collective_share=0.05, sync_share=0.6)).headline == "input-bound (moderate)"


# The tester's healthy runs: (compute share by their own timers, data wait) -> compute-bound with
# the data wait listed as secondary, and the wait's fixes still offered after compute's.
@pytest.mark.parametrize("data", [0.07, 0.05, 0.17])
def test_healthy_runs_with_some_data_wait_are_compute_bound(data):
    verdict = decide(m(data_share=data))
    assert verdict.kind == "compute-bound", verdict.headline
    assert verdict.headline == f"compute-bound; secondary: input {round(100 * data)}%"
    assert verdict.recommendations[0].code == "GL401"
    assert "GL101" in [r.code for r in verdict.recommendations]
    assert "compute bounds the step" in verdict.advice


def test_ddp_rank_with_backward_and_all_reduce_over_its_data_wait_is_compute_bound():
    # 46% backward with its overlapped all-reduce, 34% data wait, 5% exposed all-reduce wait
    verdict = decide(m(data_share=0.34, collective_share=0.05))
    assert verdict.kind == "compute-bound", verdict.headline
    assert verdict.secondary == [("input", 0.34)]
    assert verdict.advice.startswith("compute bounds the step (61%); next is input (34%)")


def test_a_data_wait_within_its_noise_is_not_a_cause():
    assert decide(m(data_share=0.06, data_noise=0.08)).secondary == []
    assert decide(m(data_share=0.6, data_noise=0.7)).kind == "compute-bound"
    assert decide(m(data_share=0.6, data_noise=0.05)).kind == "input-bound"


def test_injected_bottlenecks_keep_their_verdicts():
    assert decide(m(data_share=0.8)).headline == "input-bound (high)"
    host = decide(m(data_share=0.02, host_shares={"checkpoint writes": 0.55}, host_looks={"checkpoint writes": 40}))
    assert host.headline == "host-bound (checkpoint writes)"
    assert host.recommendations[0].code == "GL303"
    straggler = decide(m(collective_share=0.2, straggler_rank=1, straggler_share=0.25))
    assert straggler.kind == "straggler" and straggler.severity == "rank 1"
    communication = decide(m(data_share=0.02, collective_share=0.25))
    assert communication.kind == "communication-bound"
    # a loss between ranks is named over a larger compute share, with the data wait secondary
    both = decide(m(data_share=0.08, collective_share=0.15))
    assert both.kind == "communication-bound" and both.secondary == [("input", 0.08)]


def test_input_bound_recommends_loader_rules_first_with_gain_bound():
    verdict = decide(m(data_share=0.5))
    assert verdict.recommendations[0].code == "GL101"
    assert verdict.recommendations[0].expected_gain == "ceiling 2.0x (if all of the 50% went)"
    tf = decide(m(framework="tf", data_share=0.5))
    assert tf.recommendations[0].code == "GL701"


def test_compute_share_under_60_percent_says_fix_the_code_first():
    assert decide(m(data_share=0.41)).advice.startswith("fix the code first")
    assert not decide(m(data_share=0.39, gpu_util=97.0)).advice.startswith("fix the code first")


def test_more_gpus_only_when_gpu_busy_and_little_data_wait():
    assert decide(m(data_share=0.01, gpu_util=96.0)).advice.startswith("more GPUs can help")
    assert not decide(m(data_share=0.01, gpu_util=94.0)).advice.startswith("more GPUs")
    assert not decide(m(data_share=0.06, gpu_util=99.0)).advice.startswith("more GPUs")


def test_gpu_not_measured_never_recommends_gpus():
    verdict = decide(m(data_share=0.01, gpu_util=None))
    assert verdict.kind == "compute-bound"
    assert "not measured" in verdict.advice and "more GPUs can help" not in verdict.advice


def test_starved_gpu_without_data_wait_is_not_compute_bound():
    verdict = decide(m(data_share=0.01, gpu_util=60.0))
    assert verdict.kind == "inconclusive"
    assert decide(m(data_share=0.01, gpu_util=60.0, syncs_per_step=3.0)).kind == "sync-bound"
    # Syncs with a busy GPU are not the bottleneck.
    assert decide(m(data_share=0.01, gpu_util=90.0, syncs_per_step=3.0)).kind == "compute-bound"


def test_too_few_steps_is_inconclusive():
    verdict = decide(m(steps=2))
    assert verdict.kind == "inconclusive" and "3 at least" in verdict.reasons[0]


def test_nothing_measurable_is_inconclusive_not_compute_bound():
    assert decide(m(data_share=None, gpu_util=None)).kind == "inconclusive"


def test_busy_machine_and_noisy_steps_warn():
    verdict = decide(m(other_cores=1.2, step_cv=0.8))
    assert any("other processes" in w for w in verdict.warnings)
    assert any("vary a lot" in w for w in verdict.warnings)
    assert decide(m(other_cores=0.2, step_cv=0.1)).warnings == []


def test_serial_pipeline_reason_when_main_process_pegged():
    verdict = decide(m(data_share=0.6, main_cores=0.98, worker_cores=0.0))
    assert any("serial" in r for r in verdict.reasons)


def test_no_serial_claim_for_a_loader_with_workers():
    """Workers started again every few batches can die between two looks of the CPU sampler and
    read as 0 cores; the loader's settings say it has 4: its pipeline is not serial."""
    respawned = {"num_workers": 4, "persistent_workers": False}
    verdict = decide(m(data_share=0.6, main_cores=1.1, worker_cores=0.0, loader=respawned))
    assert verdict.kind == "input-bound" and not any("serial" in r for r in verdict.reasons)
    serial = {"num_workers": 0, "persistent_workers": False}
    verdict = decide(m(data_share=0.6, main_cores=1.1, worker_cores=0.0, loader=serial))
    assert any("serial" in r for r in verdict.reasons)


@pytest.mark.parametrize(
    ("batches", "steps", "k"), [(214, 200, None), (400, 200, 2), (398, 200, 2), (800, 200, 4), (300, 200, None)]
)
def test_micro_batches_only_near_a_whole_number_of_two_or_more(batches, steps, k):
    assert micro_batches(batches, steps) == k


def test_a_wait_series_too_short_to_tell_its_noise_leaves_the_threshold_to_decide():
    """Ten steps make two blocks, whose Student's t (12.7 at 95%) put a 95% data wait "within its
    noise" and called a run that waits for its input 95% of the time compute-bound."""
    from types import SimpleNamespace

    from gpulint.runtime_check.profile import data_noise

    waits = [0.060, 0.066] * 5
    assert data_noise(SimpleNamespace(data_waits=waits, count=10, mean=0.066)) is None
    long_run = SimpleNamespace(data_waits=waits * 3, count=30, mean=0.066)
    noise = data_noise(long_run)
    assert noise is not None and noise < 0.05
    assert (
        decide(m(data_share=0.95, data_noise=data_noise(SimpleNamespace(data_waits=waits, count=10, mean=0.066)))).kind
        == "input-bound"
    )


LOADER = {"num_workers": 0, "persistent_workers": False}


def test_the_workers_gain_is_bounded_by_the_cores_the_profile_saw_idle():
    """ "At most 2.4x" from workers on 2 cores that other processes kept busy; verify then measured
    0.97x: the workers took the cores the step used."""
    idle = decide(m(data_share=0.6, loader=LOADER, cores=4, other_cores=0.0, main_cores=1.0))
    assert (
        idle.recommendations[0].expected_gain
        == "at most 2.5x (0 workers now; 3.6 of 4 cores idle: they split the 60% wait)"
    )
    busy = decide(m(data_share=0.6, loader=LOADER, cores=4, other_cores=2.5, main_cores=1.0))
    gain = busy.recommendations[0].expected_gain
    # 4 cores less 2.5 kept busy, less the step's compute (a core, 40% of the time): 0.6 / 1.1 of the step
    assert (
        gain == "at most 1.8x (0 workers now; 1.1 of 4 cores idle, 2.5 kept busy by other processes: "
        "they split the 60% wait)"
    )
    full = decide(m(data_share=0.6, loader=LOADER, cores=2, other_cores=1.5, main_cores=1.0))
    gain = full.recommendations[0].expected_gain
    assert full.recommendations[0].code == "GL101" and gain.startswith("none expected here (0.1 of 2 cores idle"), gain
    # loading that sleeps or waits on files took a third of a core: three such workers fit a core
    waiting = decide(m(data_share=0.9, loader=LOADER, cores=2, other_cores=1.5, main_cores=0.3))
    gain = waiting.recommendations[0].expected_gain
    assert gain.startswith(
        "at most 1.7x (0 workers now; 0.5 of 2 cores idle, 1.5 kept busy by other processes; loading took 0.3 core"
    )
    # the CPU not sampled: the machine's cores bound it, as before
    unknown = decide(m(data_share=0.6, loader=LOADER, cores=4))
    assert unknown.recommendations[0].expected_gain.startswith("at most 2.5x (0 workers now; 4 cores split")


def test_intra_op_threads_competing_with_loader_workers_are_named_with_the_setting():
    threads = {**LOADER, "num_workers": 2, "intra_op_threads": 4}
    verdict = decide(m(data_share=0.6, loader=threads, cores=4, other_cores=0.0, main_cores=1.0))
    said = [w for w in verdict.warnings if "intra-op" in w]
    assert said == [
        "torch runs 4 intra-op threads on 4 cores beside 2 loader workers: they compete for the same cores; "
        "leave the workers theirs with torch.set_num_threads(2) in the script or OMP_NUM_THREADS=2 in the environment"
    ]
    # no workers yet, but the workers fix is what the verdict recommends: one worker at least
    serial = decide(m(data_share=0.6, loader={**LOADER, "intra_op_threads": 2}, cores=2))
    assert any("beside 1 loader worker:" in w and "set_num_threads(1)" in w for w in serial.warnings)
    fits = decide(m(data_share=0.6, loader={**threads, "intra_op_threads": 2}, cores=4))
    assert not [w for w in fits.warnings if "intra-op" in w]
    quiet = decide(m(data_share=0.0, loader={**LOADER, "intra_op_threads": 8}, cores=8))  # no workers, none wanted
    assert not [w for w in quiet.warnings if "intra-op" in w]
    # One thread already (pytorch-cifar's two workers on two cores): set_num_threads(1) would change
    # nothing; fewer workers is what leaves the step its core.
    one = decide(m(data_share=0.6, loader={**threads, "intra_op_threads": 1}, cores=2))
    assert [w for w in one.warnings if "intra-op" in w] == [
        "torch runs 1 intra-op thread on 2 cores beside 2 loader workers: they compete for the same cores; "
        "one thread is the fewest torch runs: leave it a core with num_workers=1 at most"
    ]


def test_verify_warns_when_the_fixed_runs_workers_compete_with_intra_op_threads():
    from gpulint.runtime_check.cpu import CpuSummary
    from gpulint.runtime_check.measure import ProcessRun
    from gpulint.runtime_check.verify import run_warnings
    from tests.runtime.helpers import measured_run

    def run(workers: int):
        result = measured_run([0.1] * 5)
        result.cpu = CpuSummary(1.0, float(workers), workers, 1.0 + workers, 0.0, [50.0, 50.0], 2, 10)
        loader = {**LOADER, "num_workers": workers, "intra_op_threads": 2}
        result.processes = [ProcessRun(None, 1, result.steps, {"loader": loader})]
        return result

    warnings = run_warnings([run(0), run(2), run(0), run(2)])
    assert warnings == [
        "torch runs 2 intra-op threads on 2 cores beside 2 loader workers: they compete for the same cores; "
        "leave the workers theirs with torch.set_num_threads(1) in the script or OMP_NUM_THREADS=1 in the environment"
    ]
    assert run_warnings([run(0), run(0)]) == []


def test_persistent_workers_only_where_an_epoch_began_again_in_the_run():
    """pytorch-cifar's loader, two workers on two cores, decoding each image: the run read 33 of the
    epoch's 391 batches, so no worker started again, yet "keep workers alive between epochs" was
    the first fix -- for a wait persistent workers cannot shorten."""
    workers = {**LOADER, "num_workers": 2, "batches": 391}
    mid_epoch = decide(m(data_share=0.78, loader=workers, epoch_turned=False, cores=2))
    assert mid_epoch.kind == "input-bound"
    assert "GL103" not in [r.code for r in mid_epoch.recommendations]
    first = mid_epoch.recommendations[0]
    assert first.code == "" and first.action.startswith("make each sample cheaper to load")
    across = decide(m(data_share=0.78, loader=workers, epoch_turned=True, cores=2))
    assert across.recommendations[0].code == "GL103"
    unknown = decide(m(data_share=0.78, loader=workers, cores=2))
    assert unknown.recommendations[0].code == "GL103"


def test_an_epoch_turns_when_the_run_reads_more_batches_than_it_holds():
    from gpulint.runtime_check.profile import epoch_turned
    from tests.runtime.helpers import step_stats

    steps = step_stats([0.1] * 20, [0.05] * 20)
    steps.batches, steps.total = 20, 23
    assert epoch_turned(steps, {"batches": 391}) is False
    assert epoch_turned(steps, {"batches": 10}) is True
    assert epoch_turned(steps, {"batches": None}) is None
    assert epoch_turned(steps, None) is None
