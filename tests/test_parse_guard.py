"""What reaches libcst's parser: nesting measured as libcst nests, the pruned walk agreeing with a
full one, and a crash in a forked child reported instead of killing the run."""

from __future__ import annotations

import ast
import builtins
import os
import signal
import threading

import hypothesmith
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from gpulint.linter.analysis import parse_guard
from gpulint.linter.analysis.isolation import ChildCrashed, call_isolated, can_isolate
from gpulint.linter.analysis.parse_guard import MAX_NESTING, UnanalysableSource, check_source, too_deep, walk_tree
from gpulint.linter.config import Settings
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run

# A training step that logs a synced loss twelve times (over MAX_NESTING bytes: the guard measures it).
TRAINING = (
    "import torch\n\n\ndef train(model, loader, optimizer):\n"
    "    model.cuda()\n    for step, batch in enumerate(loader):\n"
    "        loss = model(batch)\n        loss.backward()\n        optimizer.step()\n"
    + "".join(f"        print('loss {i}', loss.item())\n" for i in range(12))
)


def full_depth(node: ast.AST, depth: int = 1) -> int:
    """The libcst-like depth by brute force: every node entered, an `and`/`or` chain nested pairwise."""
    step = max(len(node.values) - 1, 1) if isinstance(node, ast.BoolOp) else 1
    return max([depth, *(full_depth(child, depth + step) for child in ast.iter_child_nodes(node))])


@pytest.mark.parametrize(
    "source, depth",
    [
        ("x = a + b + c", 6),  # Module, Assign, BinOp, BinOp, Name, Load
        ("x = a and b and c and d", 7),  # the chain counts 3 levels, as libcst nests it
        ("x = f(g(h(1)))", 7),  # ..., Call, Call, Call, Name h, Load
    ],
)
def test_depth_counts_as_libcst_nests(source, depth):
    assert full_depth(ast.parse(source)) == depth
    assert too_deep(ast.parse(source), depth - 1) and not too_deep(ast.parse(source), depth)
    assert walk_tree(ast.parse(source), limit=depth - 1)[1] and not walk_tree(ast.parse(source), limit=depth)[1]


@pytest.mark.slow
@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node())
def test_the_pruned_walk_decides_as_the_full_one(code):
    tree = ast.parse(code)
    depth = full_depth(tree)
    for limit in (3, 6, depth - 1, depth):
        if limit > 0:
            assert too_deep(tree, limit) == (depth > limit), limit
            assert walk_tree(tree, limit=limit)[1] == (depth > limit), limit  # (the measuring walk)


def test_real_code_passes_and_deep_code_does_not():
    check_source(b"import torch\n" * 100)
    chain = "x = " + " and ".join(["a"] * (MAX_NESTING + 10)) + "\n"
    with pytest.raises(UnanalysableSource, match=f"over {MAX_NESTING} levels"):
        check_source(chain)
    with pytest.raises(UnanalysableSource, match="too many nested parentheses"):
        check_source("x = " + "(" * 300 + "1" + ")" * 300 + "\n")


def test_a_parser_crash_on_a_source_python_rejects_is_reported(monkeypatch):
    import libcst

    def crashing_parse(source):
        os.kill(os.getpid(), signal.SIGSEGV)

    # Without a fork the crash would take the test run with it: fail here, naming the threads.
    assert can_isolate(), f"threads alive, no fork: {[t.name for t in threading.enumerate()]}"
    monkeypatch.setattr(libcst, "parse_module", crashing_parse)  # runs in the forked child only
    source = "x = (\n" + "y = 1\n" * (MAX_NESTING // 6 + 1)  # a syntax error: CPython cannot measure it
    with pytest.raises(UnanalysableSource, match=r"the parser crashed \(SIGSEGV\); skipped"):
        check_source(source)


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)  # the child's own pid: evaluated in the child


def test_call_isolated_returns_raises_and_reports_a_dead_child():
    assert call_isolated(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        call_isolated(divmod, 1, 0)
    assert can_isolate(), f"threads alive, no fork: {[t.name for t in threading.enumerate()]}"
    with pytest.raises(ChildCrashed, match="SIGSEGV"):
        call_isolated(_crash)
    with pytest.raises(ChildCrashed, match="exit status 3"):
        call_isolated(os._exit, 3)


def test_call_isolated_runs_in_process_when_threads_exist():
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert call_isolated(os.getpid) == os.getpid()
    finally:
        release.set()
        thread.join()
    assert call_isolated(os.getpid) != os.getpid()


def test_short_sources_skip_the_checks(monkeypatch):
    monkeypatch.setattr(parse_guard, "compile", lambda *a, **k: pytest.fail("compiled"), raising=False)
    check_source("x = 1\n")


def test_node_count_agrees_with_ast_walk_and_stops_past_the_limit():
    tree = ast.parse(TRAINING)
    nodes = sum(1 for _ in ast.walk(tree))
    assert walk_tree(tree)[0] == nodes
    assert walk_tree(tree, nodes)[0] == nodes
    assert walk_tree(tree, 10)[0] == 11  # stops once over


def test_the_measuring_walk_visits_every_node_it_counts():
    tree = ast.parse(TRAINING)
    visited: list[ast.AST] = []
    every_type = {type(node): visited.append for node in ast.walk(tree)}
    assert walk_tree(tree, handlers=every_type)[0] == len(visited)
    assert sorted(map(id, visited)) == sorted(map(id, ast.walk(tree)))
    calls: list[ast.AST] = []
    walk_tree(tree, handlers={ast.Call: calls.append})  # (only the types handled)
    assert calls and sorted(map(id, calls)) == sorted(id(node) for node in ast.walk(tree) if isinstance(node, ast.Call))


def test_a_tree_over_the_budget_is_still_measured_for_depth():
    # (the walk stops counting at the budget; the depth decides which reason the skip gives)
    chain = "x = " + " and ".join(["a"] * (MAX_NESTING + 10)) + "\n"
    assert walk_tree(ast.parse(chain), 10) == (11, True)


def test_a_source_over_the_node_budget_is_skipped_with_its_reason():
    nodes = sum(1 for _ in ast.walk(ast.parse(TRAINING)))
    assert check_source(TRAINING, max_nodes=nodes) is None
    with pytest.raises(UnanalysableSource, match=rf"^too large to analyse \(more than {nodes - 1} syntax nodes"):
        check_source(TRAINING, max_nodes=nodes - 1)


def test_a_run_compiles_each_file_once_for_the_index_and_the_guard(monkeypatch, tmp_path):
    """The project index and the parse guard share one CPython tree per file (the index leaves
    what the guard measured on it for the lint of the same bytes)."""
    path = tmp_path / "train.py"
    path.write_text(TRAINING)
    source = path.read_bytes()
    compiled = []
    real_compile = builtins.compile

    def counting(code, *args, **kwargs):
        flags = kwargs.get("flags", args[2] if len(args) > 2 else 0)
        if code == source and flags & ast.PyCF_ONLY_AST:
            compiled.append(code)
        return real_compile(code, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting)
    result = run([path], Settings(select=["ALL"]), RunOptions())
    assert [f.code for f in result.findings].count("GL201") == 12
    assert len(compiled) == 1
