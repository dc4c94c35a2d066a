"""Interval conditions (analysis/intervals.py): one decision, asked of libcst's tree by the loop
model and of CPython's by the project index; both trees must give the same answer."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from gpulint.linter.analysis.intervals import AST_READER, is_interval_condition
from gpulint.linter.analysis.loops import CST_READER

ROOT = Path(__file__).resolve().parent.parent

CONDITIONS = [
    ("step % 100 == 0", True),
    ("(i + 1) % args.log_interval == 0", True),
    ("not step % 10", True),
    ("i == 0 or i % 50 == 0", True),
    ("step >= next_log_step", True),
    ("is_main and step % 10 == 0", True),
    ("step % 10 == 0 or args.debug", False),
    # beside an interval, a condition true on one iteration keeps the guard a throttle
    ("last_batch or batch_idx % args.log_interval == 0", True),
    ("i % self.steps_per_epoch == 0 or i == self.max_steps", True),
    ("step % 10 == 0 or batch_idx == len(loader) - 1", True),
    ("step % 10 == 0 or mode == 'debug'", False),
    ("step % 10 == 0 or rank == world_rank", False),
    ("(step + 1) % accum_steps == 0", False),
    ("(step + 1) % gradient_accumulation_steps == 0", False),
    ("step % 100", False),
    ("args.verbose", False),
    ("rank == 0", False),
    ("args.local_rank == 0", False),
    ("'%d' % x == y", False),
    # one step of the loop: a guard, never wrapped in an interval
    ("step == num_steps - 1", True),
    ("i == len(loader) - 1", True),
    ("global_step == args.max_steps", True),
    ("epoch == args.epochs - 1 and rank == 0", True),
    ("is_last_batch", True),
    ("last_batch", True),
    ("last_batch or is_final", True),
    ("accelerator.gradient_state.end_of_dataloader", True),
    ("self.is_final_step()", True),
    ("not is_last_batch", False),
    ("mode == 'train'", False),
    ("pred == target", False),
    ("accelerator.sync_gradients", False),
    # the trees differ here: libcst pairs a chain from the left, names attributes and keywords
    ("step % 10 == 0 or args.debug or last_batch", False),
    ("last_batch or args.debug or step % 10 == 0", False),
    ("(step % 10 == 0 or args.debug) and is_main", False),
    ("tf.equal(optimizer.iterations % 100, 0)", True),
    ("tf.math.equal(0, step % 100)", True),
    ("tf.equal(step % 100, y=0)", True),
    ("tf.equal(*pair)", False),
    ("tf.equal(step % accum, 0)", False),
    ("step == True", True),
    ("flags.is_last == 1", True),
    ("f(local=step) == 0", False),
    ("step < every", True),
    ("step < (lambda every: every)(n)", True),
    ("step % 100 != 0", False),
    ("0 == step % 100", True),
    ("b'%d' % x == y", False),
    ("f'{x}' % y == 0", False),
    ("should_log(step)", True),
    ("True", False),
    ("state.end", True),
    ("get_model().last", False),
]


def on_libcst(condition: str) -> bool:
    return is_interval_condition(CST_READER, cst.parse_expression(condition))


def on_cpython(condition: str) -> bool:
    return is_interval_condition(AST_READER, ast.parse(condition, mode="eval").body)


@pytest.mark.parametrize("condition, throttles", CONDITIONS)
def test_interval_conditions_on_either_tree(condition, throttles):
    assert on_libcst(condition) is throttles
    assert on_cpython(condition) is throttles


def expressions_in(folder: Path) -> set[str]:
    """The text (as the project index keeps it: `ast.unparse`) of every condition, return value,
    boolean operation, comparison and call in the Python files under `folder`."""
    found = set()
    for path in sorted(folder.rglob("*.py")):
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # (the hostile inputs)
        for node in ast.walk(tree):
            if isinstance(node, (ast.If, ast.While, ast.IfExp)):
                found.add(ast.unparse(node.test))
            elif isinstance(node, ast.Return) and node.value is not None:
                found.add(ast.unparse(node.value))
            elif isinstance(node, (ast.BoolOp, ast.Compare, ast.Call)):
                found.add(ast.unparse(node))
    return found


@pytest.mark.parametrize("folder", ["fixtures", "tests/fixed_scripts", "tests/runtime", "gpulint"])
def test_both_trees_agree_on_real_code(folder):
    expressions = expressions_in(ROOT / folder)
    assert len(expressions) > 100
    differ = [text for text in sorted(expressions) if on_libcst(text) != on_cpython(text)]
    assert differ == []
    assert any(on_cpython(text) for text in expressions)  # (the set holds interval conditions)
