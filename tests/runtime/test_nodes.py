"""Across nodes: `gpulint profile` on each node of a `torchrun --nnodes 2` job records its ranks
under one job id, and the report merges the nodes, names the slowest and splits the collective
wait into intra-node and inter-node.  The end-to-end test runs two torchrun agents as two "nodes"
rendezvousing on 127.0.0.1; the others build the recorded runs by hand."""

import json
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpulint.runtime_check import bootstrap, distributed, nodes, scale
from gpulint.runtime_check.history import History, RunRecord
from gpulint.runtime_check.launchers import LaunchError, Rendezvous, torchrun_prefix
from gpulint.runtime_check.record import HistoryOptions, report_command
from gpulint.runtime_check.report import Output
from tests.runtime.test_distributed_units import launched, rank_process
from tests.runtime.test_runs import FIXTURES, gpulint, leftovers

DDP = str(FIXTURES / "ddp_sleep_compute.py")
EXTRA_MS = 40.0  # the slower node's extra work a step


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def distributed_unavailable() -> str | None:
    try:
        import torch.distributed as dist
    except ImportError as exc:
        return f"torch.distributed cannot be imported: {exc}"
    if not dist.is_available() or not dist.is_gloo_available():
        return "torch.distributed or its gloo backend is not built in"
    return None


@pytest.mark.slow
def test_two_nodes_record_one_job_and_the_report_names_the_slower_node(tmp_path):
    reason = distributed_unavailable()
    if reason:
        pytest.skip(reason)
    port = free_port()
    history = tmp_path / "history.db"

    def node(index: int):
        launcher = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(index),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            "nodes-test",
            "--rdzv-conf",
            "join_timeout=60",  # a node whose partner failed to start gives up within the test's time
            "--nproc-per-node",
            "1",
        ]
        extra = ["--extra-ms", str(EXTRA_MS)] if index == 1 else []
        options = ["--steps", "8", "--warmup", "2", "--timeout", "240", "--history", str(history)]
        json_file = tmp_path / f"node{index}.json"
        command = [*launcher, DDP, "--compute-ms", "20", *extra]
        return gpulint(tmp_path, "profile", *options, "--json", str(json_file), "--", *command, timeout=300)

    with ThreadPoolExecutor(2) as pool:
        fast, slow = pool.map(node, (0, 1))
    for run in (fast, slow):
        assert run.returncode == 0, run.stdout + run.stderr
    parts = [json.loads((tmp_path / f"node{i}.json").read_text())["ranks"]["job"] for i in (0, 1)]
    # One job id for both nodes; c10d numbers the nodes itself (--node-rank is ignored), so the
    # slower node is whichever the agent given --extra-ms became.
    assert parts[0]["id"] == parts[1]["id"] and parts[0]["id"].startswith("nodes-test-")
    assert {parts[0]["node"], parts[1]["node"]} == {0, 1} and parts[0]["nodes"] == 2
    slower = parts[1]["node"]

    with History.open(history, create=False) as stored:
        runs = stored.job_runs(parts[0]["id"])
    assert len(runs) == 2 and {r.meta["job"]["node"] for r in runs} == {0, 1}
    merged = nodes.merge(runs)
    assert merged.complete and merged.slowest == slower
    assert merged.slowest_excess == pytest.approx(EXTRA_MS / 1000, abs=0.015)
    # One rank a node: no rank of the same node to wait for; the fast node's rank waits the extra
    # work of the slower one, the slower one's rank waits only for the transfer (mean of the two).
    assert merged.intra == pytest.approx(0.0, abs=0.002)
    assert merged.inter == pytest.approx(EXTRA_MS / 2000, abs=0.008)
    assert merged.transfer is not None and merged.transfer >= 0

    # The node that recorded last saw both and printed the merged view.
    last = max((fast, slow), key=lambda run: "2 of 2 nodes recorded" in run.stdout)
    assert f"Across nodes (job {parts[0]['id']}: 2 of 2 nodes recorded)" in last.stdout
    assert f"slowest node: node {slower} (" in last.stdout and "inter-node" in last.stdout

    page = tmp_path / "report.html"
    shown = gpulint(tmp_path, "report", str(runs[0].id), "--html", str(page))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"slowest node: node {slower} (" in shown.stdout
    html = page.read_text()
    assert "<h2>Across nodes</h2>" in html and f"{slower} (slowest)" in html and "inter-node" in html
    assert leftovers(tmp_path) == []


# -- the pieces, on runs built by hand -------------------------------------------------------
def node_run(job: str, node: int, ranks: list[tuple[int, float, float]], nodes_in_job: int = 2) -> RunRecord:
    """A node's recorded profile: `ranks` as (rank, step time, collective wait) in seconds."""
    return RunRecord(
        kind="profile",
        command=f"gpulint profile -- torchrun --nnodes {nodes_in_job} train.py",
        command_key=json.dumps(["profile", "train.py", f"node{node}"]),
        status="stopped",
        started_at=1_700_000_000.0 + node,
        host=f"host{node}",
        meta={
            "job": {"id": job, "node": node, "nodes": nodes_in_job, "host": f"host{node}", "note": ""},
            "ranks": [
                {"rank": rank, "node": node, "step_time": step, "collective_wait": wait, "data_wait": 0.001}
                for rank, step, wait in ranks
            ],
        },
    )


# Node 0: rank 0 works 50 ms, rank 1 60 ms; node 1: rank 2 works 90 ms, rank 3 70 ms.  Every step
# takes 100 ms: 10 ms of it the all-reduce's transfer, the rest waiting for rank 2.
NODE0 = [(0, 0.100, 0.050), (1, 0.100, 0.040)]
NODE1 = [(2, 0.100, 0.010), (3, 0.100, 0.030)]


def test_merge_splits_the_wait_by_whom_the_ranks_wait_for_and_names_the_slowest_node():
    report = nodes.merge([node_run("j-1", 0, NODE0), node_run("j-1", 1, NODE1)])
    assert report.complete and [n.node for n in report.nodes] == [0, 1]
    assert report.slowest == 1 and report.slowest_excess == pytest.approx(0.030)
    assert "node 1 (host1, ranks 2, 3) works 30.0 ms per step longer" in report.slowest_note
    assert report.advice.startswith("node 1 is the straggler: balance the work across nodes")
    assert report.advice.endswith(
        "15.0 ms of the ranks' collective wait a step is waiting for a slower node; the rest is not"
    )
    # rank 0: 10 ms for rank 1 (its node), 30 ms for node 1, 10 ms transfer; rank 1: 0, 30, 10;
    # rank 2: 0, 0, 10; rank 3: 20 for rank 2 (its node), 0, 10.
    assert report.intra == pytest.approx((0.010 + 0 + 0 + 0.020) / 4)
    assert report.inter == pytest.approx((0.030 + 0.030) / 4)
    assert report.transfer == pytest.approx(0.010)


def test_merge_without_every_node_leaves_the_split_unmeasured_and_keeps_the_first_run_of_a_node():
    first = node_run("j-1", 0, NODE0)
    again = node_run("j-1", 0, NODE1)  # the same node twice (a history merged twice): the first counts
    report = nodes.merge([first, again])
    assert report.missing == [1] and not report.complete and report.slowest is None
    assert [r.rank for r in report.nodes[0].ranks] == [0, 1]
    assert report.intra is None and report.split_note == "not measured: needs every node's ranks"
    balanced = nodes.merge([node_run("j-2", 0, [(0, 0.1, 0.01)]), node_run("j-2", 1, [(1, 0.1, 0.011)])])
    assert balanced.slowest is None and balanced.slowest_note.startswith("none:")
    crafted = node_run("j-3", 10**300, NODE0, nodes_in_job=10**300)  # a stored run is input
    bounded = nodes.merge([crafted, node_run("j-3", 0, NODE0)])
    assert bounded.nodes_expected == nodes.MAX_NODES and [n.node for n in bounded.nodes] == [0]


def test_history_finds_the_runs_of_a_job_by_its_exact_id(tmp_path):
    with History.open(tmp_path / "history.db") as history:
        for run in (node_run("job-1", 0, NODE0), node_run("job-12", 1, NODE1), node_run("job-1", 1, NODE1)):
            history.record(run)
        assert [r.meta["job"]["node"] for r in history.job_runs("job-1")] == [0, 1]
        assert history.job_runs("job") == []


def test_report_merges_the_nodes_histories_in_text_and_html(tmp_path, capsys):
    for node, ranks in ((0, NODE0), (1, NODE1)):
        with History.open(tmp_path / f"node{node}.db") as history:
            history.record(node_run("j-7", node, ranks))
    page = tmp_path / "report.html"
    alone = report_command(Output(), HistoryOptions(tmp_path / "node0.db"), "last", page)
    assert alone == 0 and "not recorded here: node 1 (each node records" in capsys.readouterr().out
    merged = report_command(
        Output(), HistoryOptions(tmp_path / "node0.db"), "last", page, None, [tmp_path / "node1.db"]
    )
    text = capsys.readouterr().out
    assert merged == 0 and "Across nodes (job j-7: 2 of 2 nodes recorded)" in text
    assert "slowest node: node 1 (host1, ranks 2, 3)" in text
    assert "intra-node 7.5 ms, inter-node 15.0 ms, transfer 10.0 ms" in text
    html = page.read_text()
    assert "<h2>Across nodes</h2>" in html and "<td>1 (slowest)</td>" in html and "inter-node 15.0 ms" in html


def test_report_refuses_merge_for_a_run_of_one_node_and_a_crafted_job(tmp_path, capsys):
    single = node_run("j-8", 0, NODE0)
    single.meta = {}
    crafted = node_run("j-9", 0, NODE0)
    crafted.meta["ranks"][0]["step_time"] = "slow"
    with History.open(tmp_path / "history.db") as history:
        history.record(single)
        history.record(crafted)
    options = HistoryOptions(tmp_path / "history.db")
    assert report_command(Output(), options, "1", tmp_path / "a.html", None, [tmp_path / "history.db"]) == 2
    assert "is not part of a multi-node job" in capsys.readouterr().err
    assert report_command(Output(), options, "2", tmp_path / "b.html") == 2
    assert "step_time is 'slow', not a number" in capsys.readouterr().err
    assert not (tmp_path / "b.html").exists()


def test_scale_meets_at_one_port_and_id_per_run():
    rendezvous = Rendezvous.parse(2, "node0.cluster:29400", "sweep")
    prefix = torchrun_prefix(4, "python", rendezvous, 3)
    assert prefix[prefix.index("--rdzv-endpoint") + 1] == "node0.cluster:29403"
    assert prefix[prefix.index("--rdzv-id") + 1] == "sweep-3" and "--standalone" not in prefix
    assert prefix[prefix.index("--nnodes") + 1] == "2" and prefix[-2:] == ["--nproc-per-node", "4"]
    for endpoint, nnodes, message in (("node0", 2, "HOST:PORT"), ("node0:29400", 1, "2 or more")):
        with pytest.raises(LaunchError, match=message):
            Rendezvous.parse(nnodes, endpoint, "sweep")


@pytest.mark.slow
@pytest.mark.timed
def test_scale_across_two_nodes_meets_at_every_run_and_records_each_node(tmp_path):
    reason = distributed_unavailable()
    if reason:
        pytest.skip(reason)
    port = free_port()  # runs meet at port, port + 1, ...: a few ports above a free one are free too

    def node(index: int):
        options = ["--nproc", "1,2", "--runs", "2", "--steps", "4", "--warmup", "2", "--timeout", "200"]
        options += ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "sweep"]
        options += ["--history", str(tmp_path / f"node{index}.db"), "--json", str(tmp_path / f"node{index}.json")]
        return gpulint(tmp_path, "scale", *options, "--", DDP, "--compute-ms", "100", timeout=900)

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(node, (0, 1)))
    for run in done:
        assert run.returncode in (0, 1, 4), run.stdout + run.stderr  # a verdict, whichever
        assert "this node's part of 2 nodes" in run.stdout
    records = [json.loads((tmp_path / f"node{i}.json").read_text()) for i in (0, 1)]
    runs = [record["nodes"]["runs"] for record in records]
    # Both nodes ran the same rotation, and each run was one job of both nodes.
    assert [r["nproc"] for r in runs[0]] == [r["nproc"] for r in runs[1]] == [1, 1, 2, 2]
    assert [r["job"] for r in runs[0]] == [r["job"] for r in runs[1]]
    assert all(r["job"].startswith("sweep-") for r in runs[0])
    assert all({a["node"], b["node"]} == {0, 1} for a, b in zip(*runs, strict=True))
    for index, record in enumerate(records):
        assert [len(size["run_throughputs"]) for size in record["sizes"]] == [2, 2]
        with History.open(tmp_path / f"node{index}.db", create=False) as history:
            (stored,) = history.runs(kind="scale")
            assert "--nnodes 2 --rdzv-endpoint" in stored.command and stored.meta["nodes"]["nnodes"] == 2
    assert leftovers(tmp_path) == []


def test_scale_wants_nnodes_and_the_endpoint_together(tmp_path):
    run = gpulint(tmp_path, "scale", "--nproc", "1,2", "--nnodes", "2", "--", DDP)
    assert run.returncode == 2 and "--nnodes and --rdzv-endpoint go together" in run.stderr


def test_a_node_of_a_job_knows_its_part_and_a_single_node_run_has_none():
    ranks = [rank_process(r, 0.1, (0.01, 0.02)) for r in (2, 3)]
    for process in ranks:
        process.report.update(node=1, nodes=2, host="host1", job={"id": "j-1", "note": ""})
    report = distributed.rank_report(launched(*ranks))
    assert report.job == distributed.JobPart("j-1", 1, 2, "host1", "")
    assert [r.node for r in report.ranks] == [1, 1]
    for process in ranks:
        process.report.update(node=0, nodes=1, job=None)  # torchrun --standalone: one node
    assert distributed.rank_report(launched(*ranks)).job is None


def test_scale_across_nodes_records_the_rendezvous_and_each_runs_job():
    ranks = [rank_process(0, 0.1, (0.01, 0.02))]
    ranks[0].report.update(node=1, nodes=2, host="host1", job={"id": "sweep-0-ab12", "note": ""})
    result = scale.ScaleResult("train.py", "weak", [scale.SizeRuns(1, [launched(*ranks)])], [1])
    result.rendezvous = Rendezvous.parse(2, "node0:29400", "sweep")
    record = scale.scale_record(result)
    assert record["nodes"]["nnodes"] == 2 and record["nodes"]["rdzv_endpoint"] == "node0:29400"
    assert record["nodes"]["runs"] == [{"nproc": 1, "job": "sweep-0-ab12", "node": 1}]


@pytest.mark.slow  # imports torch
def test_without_the_launchers_store_the_job_is_named_by_the_master_address(monkeypatch):
    torch = pytest.importorskip("torch")
    if distributed_unavailable():
        pytest.skip(distributed_unavailable())
    port = free_port()  # nothing listens there
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job7")
    monkeypatch.setattr(bootstrap, "JOB_TIMEOUT_S", 0.5)
    monkeypatch.setattr(bootstrap, "STATE", bootstrap.State({"out": "unused"}))
    agreement = bootstrap.JobAgreement(torch).start()
    job = agreement.result()
    assert job["id"] == f"job7@127.0.0.1:{port}" and "store was not reached" in job["note"]
