"""The per-step region (analysis/step_region.py): in a module whose only per-step code is the
functions another module runs per step, a rule that reports per-step work only is run only if
those functions' code holds its site triggers -- without changing a finding.

Checked three ways: each rule that says it reports per-step work only (a trigger group of
STEP_LOOP alone) reports nothing where the loop model finds no per-step code; wherever one of its
own INVALID cases reports inside a function, that function's code holds the rule's site triggers;
and helper modules like those of real repositories are parsed (and reported) or not as their
per-step functions say.
"""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from gpulint.linter import catalog
from gpulint.linter.analysis.code_shapes import EVALUATED, HOST_READ, LOGGED, STEP_LOOP, code_shapes
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.loops import LoopModel
from gpulint.linter.analysis.project import ModuleView
from gpulint.linter.analysis.step_region import _ModuleCode, _TensorNames, region_shapes
from gpulint.linter.case_runner import findings_of, linter_for
from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.rules import all_rules
from tests.helpers import FIXTURES

PER_STEP_RULES = [rule for rule in all_rules() if rule.catalog_entry().reports_per_step_only]


def test_the_catalog_spells_step_loop_as_the_shapes_do():
    assert catalog._STEP_LOOP_GROUP == (STEP_LOOP,)
    assert {rule.code for rule in PER_STEP_RULES} >= {"GL104", "GL201", "GL202", "GL301", "GL302", "GL303"}


@pytest.mark.parametrize("rule", PER_STEP_RULES, ids=lambda rule: rule.code)
def test_a_rule_with_a_step_loop_group_alone_reports_per_step_work_only(rule, monkeypatch):
    reported = sum(len(findings_of(linter_for(rule, case), rule, case.source, case.path)) for case in rule.INVALID)
    assert reported  # (the cases report, with the loop model as it is)
    # No code runs per step: not in a step loop, not in a step function, not in what the view names.
    monkeypatch.setattr(LoopModel, "_per_step_boundary", lambda self, node: (None, []))
    for index, case in enumerate(rule.INVALID):
        found = findings_of(linter_for(rule, case), rule, case.source, case.path)
        assert not found, f"{rule.code} INVALID[{index}] reports code the loop model does not run per step"


def _scopes(node: ast.AST, prefix: str = ""):
    """Every function, class and lambda, with the qualified name of a function (loops.qualname)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield child, None if isinstance(child, ast.ClassDef) else f"{prefix}{child.name}"
            yield from _scopes(child, f"{prefix}{child.name}.")
        else:
            if isinstance(child, ast.Lambda):
                yield child, None
            yield from _scopes(child, prefix)


def _innermost_function(tree: ast.Module, row: int, column: int) -> str | None:
    """The function whose own code holds the position (None: module code, a lambda, a class body)."""
    position = (row, column - 1)
    holding = [
        (node, name)
        for node, name in _scopes(tree)
        if (node.lineno, node.col_offset) <= position < (node.end_lineno, node.end_col_offset)
    ]
    return max(holding, key=lambda held: (held[0].lineno, held[0].col_offset))[1] if holding else None


def _as_a_function(source: str) -> str | None:
    """The module's code as the body of `def main():` (what it reports then lies in a function),
    or None where that is not Python (`from x import *` in a function)."""
    wrapped = "def main():\n" + textwrap.indent(source, "    ") + "\n    pass\n"
    try:
        ast.parse(wrapped)
    except SyntaxError:
        return None
    return wrapped


def test_where_a_per_step_rule_reports_in_a_function_that_functions_code_holds_its_site_triggers():
    checked = {rule.code: 0 for rule in PER_STEP_RULES}
    for rule in PER_STEP_RULES:
        entry = rule.catalog_entry()
        groups = (*(entry.triggers or ())[: entry.site_triggers], (STEP_LOOP,))
        for index, case in enumerate(rule.INVALID):
            for source in filter(None, (case.source, _as_a_function(case.source))):
                tree = ast.parse(source)
                for finding in findings_of(linter_for(rule, case), rule, source, case.path):
                    function = _innermost_function(tree, finding.location.row, finding.location.column)
                    if function is None:
                        continue  # (module code: never in a region)
                    shapes = region_shapes(tree, {function}, entry.site_shapes())
                    missing = [group for group in groups if not shapes.intersection(group)]
                    assert not missing, (
                        f"{rule.code} INVALID[{index}]: reported in `{function}`, which holds none of {missing}"
                    )
                    checked[rule.code] += 1
    assert all(checked.values()), checked


# -- helper modules, as real repositories have them --------------------------------------------------
HELPERS = textwrap.dedent(
    """
    import logging

    import torch
    from torch import save as keep
    from torch.cuda import synchronize as wait

    log = logging.getLogger(__name__)


    def chunked_cross_entropy(logits, targets, chunk_size: int = 128):
        if isinstance(logits, list):
            if chunk_size == 0:
                logits = torch.cat(logits, dim=1)
                return torch.nn.functional.cross_entropy(logits, targets)
            chunks = targets.split(logits[0].size(1), dim=1)
            return torch.cat([c.reshape(-1) for c in chunks]).sum()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


    def running_mean(losses):
        total = torch.stack(losses).sum()
        return total.item() / len(losses)


    def store(state, path):
        keep(state, path)


    def timed(fn):
        wait()
        return fn()


    def setup(model, device):
        log.info("moving the model")
        model.to(device)
        return float(model.loss)
    """
).encode()


def _helpers_view(*functions: str) -> ModuleView:
    # another module's training loop (in a module that imports torch and names an accelerator)
    # calls `functions` of this one on every step
    return ModuleView(per_step=frozenset(functions), torch_loop_elsewhere=True, accelerator_loop_elsewhere=True)


def _lint_helpers(view: ModuleView, trigger_filter: bool = True):
    # (hints shown: GL202, GL204 and GL302 are hints by default, and parsing is about what may be reported)
    return Linter(Settings(select=["ALL"], show_hints=True), trigger_filter=trigger_filter).lint_source(
        HELPERS, "helpers.py", project=view
    )


@pytest.mark.parametrize(
    "function, codes",
    [
        # conditions on numbers, sizes of plain tensors: nothing the per-step rules report
        ("chunked_cross_entropy", []),
        ("running_mean", ["GL201"]),  # `.item()`
        ("store", ["GL303"]),  # `torch.save` under another name
        ("timed", ["GL204"]),  # `torch.cuda.synchronize` under another name
    ],
)
def test_a_helper_run_per_step_is_parsed_only_where_its_code_may_be_reported(function, codes):
    result = _lint_helpers(_helpers_view(function))
    assert [finding.code for finding in result.findings] == codes
    assert result.parsed == bool(codes)
    unfiltered = _lint_helpers(_helpers_view(function), trigger_filter=False)
    assert unfiltered.parsed and unfiltered.findings == result.findings


def test_code_outside_the_per_step_functions_does_not_count():
    # `setup` moves a model, logs and reads a tensor back: once, so none of it makes the helper parsed
    assert not _lint_helpers(_helpers_view("chunked_cross_entropy")).parsed
    # ...but run per step it is reported
    codes = sorted(finding.code for finding in _lint_helpers(_helpers_view("setup")).findings)
    assert codes == ["GL201", "GL202", "GL302"]


def test_a_module_with_step_code_of_its_own_is_filtered_as_before():
    source = HELPERS + b"\n\ndef train(loader, opt):\n    for batch in loader:\n        opt.step()\n"
    result = Linter(Settings(select=["GL201"]), trigger_filter=True).lint_source(
        source, "helpers.py", project=_helpers_view("chunked_cross_entropy")
    )
    assert result.parsed  # (its own loop may make any function a step function)


# Every way a name becomes a tensor, in one module (most rule cases use a few).
TENSOR_WAYS = textwrap.dedent(
    """
    import torch as T
    from torch.nn import functional as F

    total = 0
    total += criterion(out, y)
    self.acc = (pred == y).float()
    hidden = F.relu(x)
    scaled = hidden * 2
    grads = -scaled
    loss_value.backward()
    zeros = T.zeros(3)
    out = self.model(x)
    name = T.get_default_dtype()
    """
)


def _sources():
    """Every rule case and fixture: code to compare the two readings of a module's tensors on."""
    yield TENSOR_WAYS
    for rule in all_rules():
        for case in (*rule.VALID, *rule.INVALID):
            yield case.source
    for path in sorted(FIXTURES.rglob("*.py")):
        yield path.read_text(encoding="utf-8", errors="replace")


def test_the_tensor_names_read_from_cpythons_tree_are_pytorchs():
    """step_region._TensorNames is pytorch.TensorNames on the other tree: the same names."""
    compared = 0
    for source in _sources():
        try:
            tree, module = ast.parse(source), cst.parse_module(source)
        except (SyntaxError, cst.ParserSyntaxError):
            continue
        ctx = FileContext(module, "t.py", {}, frozenset({"Call"}), source.encode())
        assert _TensorNames(_ModuleCode(tree)).names == ctx.torch.tensors.names, source
        compared += bool(ctx.torch.tensors.names)
    assert compared > 100


# -- what the region holds ---------------------------------------------------------------------------
def _host_read(body: str, module: str = "import torch\n") -> bool:
    source = module + "def step(batch, chunk_size: int = 8):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return HOST_READ in region_shapes(ast.parse(source), {"step"}, frozenset({HOST_READ}))


@pytest.mark.parametrize(
    "body, read",
    [
        ("return batch.item()\n", True),
        ("if chunk_size == 0:\n    return None\n", False),  # a number
        ("loss = criterion(batch)\nif loss > 10:\n    return None\n", True),
        ("if isinstance(batch, list) and batch is not None:\n    return None\n", False),
        ("x = torch.zeros(3)\nprint(f'{x}')\n", True),
        ("print(f'{chunk_size}')\n", False),
        ("t = torch.rand(3)\nn = t[0].size(0)\n", False),  # an index: its size is known
        ("t = torch.rand(3)\nn = len(t[t > 0])\n", True),  # a selection
        ("if torch.isnan(batch).any():\n    return None\n", True),
        ("loss = criterion(batch)\nline = '%.3f' % loss\n", True),
        ("line = '%d' % chunk_size\n", False),
    ],
)
def test_host_read_is_what_gl201_may_report(body, read):
    assert _host_read(body) == read


def test_tensor_names_come_from_the_whole_module():
    # `total` is given a tensor in another function: comparing it reads it back
    module = "import torch\ndef reset():\n    global total\n    total = torch.zeros(1)\n"
    assert _host_read("if total > 1:\n    pass\n", module)
    assert not _host_read("if total > 1:\n    pass\n")


def test_the_region_is_the_named_functions_own_code():
    source = textwrap.dedent(
        """
        class Trainer:
            def step(self):
                def inner():
                    self.loss.item()
                fn = lambda: self.loss.item()
                return inner
        """
    )
    tree = ast.parse(source)
    assert region_shapes(tree, {"Trainer.step"}, frozenset({HOST_READ})) == {STEP_LOOP}
    assert region_shapes(tree, {"Trainer.step.inner"}, frozenset({HOST_READ})) == {STEP_LOOP, HOST_READ}
    assert region_shapes(tree, {"step"}, frozenset({HOST_READ})) == frozenset()  # (no such function)


@pytest.mark.parametrize(
    "code, logged",
    [
        ("print(loss)", True),
        ("logger.info('x')", True),
        ("run.log({'loss': 1})", True),
        ("writer.add_scalar('loss', 1)", True),
        ("from wandb import log as wlog\nwlog({})", True),
        ("import mlflow\nmlflow.log_metric('loss', 1)", True),
        ("logger.warning('x')", False),  # an event, not per-step logging
        ("log_dir = make_dir()", False),
    ],
)
def test_logged_is_a_call_gl302_may_report(code, logged):
    assert (LOGGED in code_shapes(ast.parse(code), frozenset({LOGGED}))) == logged


@pytest.mark.parametrize(
    "code, evaluated",
    [
        ("evaluate(model)", True),
        ("self.validate()", True),
        ("model.eval()", True),
        ("eval('1 + 1')", False),  # the builtin
        ("validate_args(args)", False),
    ],
)
def test_evaluated_is_a_call_gl301_may_report(code, evaluated):
    assert (EVALUATED in code_shapes(ast.parse(code), frozenset({EVALUATED}))) == evaluated


def test_the_region_asks_only_for_shapes_of_code():
    with pytest.raises(ValueError, match="whole module"):
        region_shapes(ast.parse("def f():\n    pass\n"), {"f"}, frozenset({STEP_LOOP}))
