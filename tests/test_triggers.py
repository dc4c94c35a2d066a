"""The trigger filter (engine.py, stage 2): a rule runs only on code that holds one of its
`triggers`, and a file no selected rule may fire on is not parsed with libcst -- without changing a
finding or a fix.

Checked three ways: every rule's own INVALID cases pass its triggers (declarations that drift from
what a rule reports fail here, rule by rule); the code in the repository (fixtures, fixed scripts,
every rule case) is reported and fixed identically with the filter and without it
(GPULINT_IGNORE_TRIGGERS); and files whose bytes spell a rule's tokens only in docstrings,
comments or longer names are not parsed, unless the rest of the project says something about them.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.linter import catalog
from gpulint.linter.analysis.code_shapes import FACTORY_COPY, LOADER_BUILT, REPEATED_COPY, STEP_LOOP, code_shapes
from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.project import CalleeFacts, ModuleView
from gpulint.linter.analysis.pytorch import is_dataloader
from gpulint.linter.config import Settings
from gpulint.linter.engine import IGNORE_TRIGGERS, Linter
from gpulint.linter.rule import Rule
from gpulint.rules import all_rules
from tests.helpers import FIXTURES, ROOT, run_cli

RULES = all_rules()
SCRIPTS = ROOT / "tests" / "fixed_scripts"


def _passes_the_filter(rule: type[Rule], source: str) -> bool:
    entry = rule.catalog_entry()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # (no tree to read: the filter leaves the source to libcst)
    return entry.may_fire(code_shapes(tree, entry.shapes(), source))


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_every_invalid_case_passes_the_rules_triggers(rule):
    entry = rule.catalog_entry()
    for index, case in enumerate(rule.INVALID):
        assert _passes_the_filter(rule, case.source), (
            f"{rule.code} INVALID[{index}] must fire, but its code holds none of the rule's triggers "
            f"{entry.triggers} (or of its facts' shapes): a trigger the rule does not need? "
            "(Rule.triggers, analysis/code_shapes.py)"
        )


def test_the_catalog_carries_the_rules_triggers():
    # (the catalog is generated; a stale one fails tests/test_rule_catalog.py too)
    declared = {rule.code: rule.catalog_entry().triggers for rule in RULES}
    assert {entry.code: entry.triggers for entry in catalog.RULES} == declared
    assert any(triggers is not None for triggers in declared.values())


# -- what a shape is --------------------------------------------------------------------------------
def test_shapes_are_code_not_strings_or_comments():
    source = textwrap.dedent(
        '''
        """Wraps a DataLoader."""
        from torch.utils.data import DataLoader as DL  # DataLoader
        note = "loss.item() per step"
        loss.backward()
        print(f"{loss.item()}")
        '''
    )
    wanted = frozenset({"DataLoader", "DL", "torch", ".backward(", ".item(", "print(", "note", "step", "per"})
    assert code_shapes(ast.parse(source), wanted) == {
        "DataLoader",
        "DL",
        "torch",
        ".backward(",
        ".item(",
        "print(",
        "note",
    }


# -- the engine -------------------------------------------------------------------------------------
DOCSTRING_ONLY = textwrap.dedent(
    '''
    """Helpers for the DataLoader: the training loop calls loss.backward() and optimizer.step()."""
    import torch


    def collate(batch):
        return torch.stack(batch).cuda()
    '''
).encode()


def _parsed(source: bytes, trigger_filter: bool, project=None) -> bool:
    linter = Linter(Settings(select=["ALL"]), trigger_filter=trigger_filter)
    return linter.lint_source(source, "helpers.py", project=project).parsed


def test_a_file_that_names_a_rules_pattern_only_in_prose_is_not_parsed():
    assert _parsed(DOCSTRING_ONLY, trigger_filter=False)  # the bytes spell DataLoader and backward
    assert not _parsed(DOCSTRING_ONLY, trigger_filter=True)


def test_a_file_whose_code_holds_a_trigger_is_parsed():
    source = DOCSTRING_ONLY + b"\n\nloader = torch.utils.data.DataLoader(dataset)\n"
    assert _parsed(source, trigger_filter=True)


@pytest.mark.parametrize("view", [None, ModuleView(per_step=frozenset({"fit"}))], ids=["alone", "told"])
def test_a_module_that_names_the_trainer_but_sets_no_reported_argument_is_not_parsed_for_gl802(view):
    # (a Lightning library names its Trainer in annotations and builds it with other arguments)
    names = textwrap.dedent(
        """
        import lightning as L


        def fit(trainer: L.Trainer, model):
            return L.Trainer(max_epochs=3).fit(model)
        """
    ).encode()
    linter = Linter(Settings(select=["GL802"]), trigger_filter=True)
    assert not linter.lint_source(names, "helpers.py", project=view).parsed
    logs_every_step = linter.lint_source(
        names.replace(b"max_epochs=3", b"log_every_n_steps=1"), "helpers.py", project=view
    )
    assert [finding.code for finding in logs_every_step.findings] == ["GL802"]


@pytest.mark.parametrize(
    "view, parsed",
    [
        # the project says something (another module iterates its loaders every epoch), but
        # nothing that makes the module take steps: the step rules' facts still need their shapes
        (ModuleView(reiterated=frozenset({("make_loader", None)})), False),
        (ModuleView(per_step=frozenset({"collate"})), True),  # it takes part in another module's steps
        # it calls another module's function, but nothing here could take a step with what that
        # returns: no `.apply(` (every other step method is a shape of its own)
        (ModuleView(calls=(("build_optimizer", CalleeFacts(returns=("optimizer",))),)), False),
    ],
    ids=["reiterated", "per-step", "calls"],
)
def test_a_module_the_project_says_something_about_is_filtered_by_the_rules_facts_only(view, parsed):
    # (all three require steps; GL202's site trigger, `.cuda(`, is in the code `collate` runs per step)
    linter = Linter(Settings(select=["GL201", "GL202", "GL301"]), trigger_filter=True)
    assert linter.lint_source(DOCSTRING_ONLY, "helpers.py", project=view).parsed == parsed


def test_an_optimizer_another_module_returns_takes_a_step_with_apply():
    # (Keras 3's step: `optimizer.apply(grads)`, on a receiver named like nothing in particular)
    view = ModuleView(calls=(("build_optimizer", CalleeFacts(returns=("optimizer",))),))
    source = DOCSTRING_ONLY + b"\n\ndef train(grads):\n    thing = build_optimizer()\n    thing.apply(grads)\n"
    linter = Linter(Settings(select=["GL201", "GL202", "GL301"]), trigger_filter=True)
    assert linter.lint_source(source, "helpers.py", project=view).parsed


def test_where_the_project_says_something_the_reported_calls_shapes_still_count():
    view = ModuleView(per_step=frozenset({"collate"}))  # another module's loop runs `collate` per step
    copy = textwrap.dedent(
        """
        import torch
        device = torch.device("cuda")


        def collate(batch):
            return torch.stack(batch).to(device)
        """
    ).encode()
    linter = Linter(Settings(select=["GL203"]), trigger_filter=True)
    assert not linter.lint_source(copy, "helpers.py", project=view).parsed  # a copy, of no factory's tensor
    # a factory's tensor copied, in a module where nothing repeats: the view says it runs per step
    factory = linter.lint_source(copy.replace(b"torch.stack(batch)", b"torch.arange(9)"), "helpers.py", project=view)
    assert [finding.code for finding in factory.findings] == ["GL203"]


def test_loops_are_statements_not_comprehensions():
    source = "squares = [x * x for x in range(9)]\n"
    assert code_shapes(ast.parse(source), frozenset({"for", "while"})) == frozenset()
    for loop, shape in (("for x in xs:\n    pass\n", "for"), ("while True:\n    break\n", "while")):
        assert code_shapes(ast.parse(source + loop), frozenset({"for", "while"})) == {shape}


@pytest.mark.parametrize(
    "code, copied",
    [
        ("x = torch.arange(n).to(device)", True),
        ("x = torch.arange(n)[None].float().cuda()", True),  # through a subscript and host methods
        ("x = torch.zeros(n).type_as(y)", True),
        ("x = torch.LongTensor(ids).to(device)", True),  # a legacy constructor
        ("from torch import arange as span\nx = span(n).cuda()", True),  # an alias...
        ("x = span(n).cuda()\nspan = torch.arange", True),  # ...bound anywhere in the module
        ("pos = torch.arange(n)\nx = pos.to(device)", True),  # a name assigned a factory's tensor
        ("pos = positions(n)\nx = pos.to(device)", False),
        ("x = torch.tensor(data).to(device)", False),  # built from data: `device=` would copy too
        ("x = torch.zeros_like(y).to(device)", False),  # the device of its input
        ("x = model.to(device)\ny = torch.zeros(n)", False),  # a copy and a factory, apart
        ("x = self.pos.to(device)\nself.pos = torch.arange(n)", False),  # (the rule follows plain names)
    ],
)
def test_a_factory_copy_is_a_host_builders_tensor_copied(code, copied):
    wanted = frozenset({FACTORY_COPY})
    assert bool(code_shapes(ast.parse(code), wanted)) == copied


@pytest.mark.parametrize(
    "code, parsed",
    [
        ("positions = torch.arange(seq_len).to(device)\n", False),  # built once, at start-up
        ("for batch in loader:\n    positions = torch.arange(seq_len).to(device)\n", True),
        ("class Embed(torch.nn.Module):\n    def forward(self, x):\n        return torch.arange(9).cuda()\n", True),
    ],
)
def test_a_rule_about_repeated_work_is_run_only_where_something_repeats(code, parsed):
    source = f"import torch\ndevice = torch.device('cuda')\n{code}".encode()
    assert Linter(Settings(select=["GL203"]), trigger_filter=True).lint_source(source, "embed.py").parsed == parsed


TF_PIPELINE = textwrap.dedent(
    """
    import tensorflow as tf
    ds = tf.data.Dataset.range(100).map(lambda x: x * 2)
    """
)


@pytest.mark.parametrize(
    "consumed, parsed",
    [
        ("", False),  # built, never consumed here
        ("model.fit(ds, epochs=3)\n", True),
        ("for batch in iter(ds):\n    show(batch)\n", True),
    ],
)
def test_gl702_runs_only_where_a_pipeline_may_be_consumed(consumed, parsed):
    source = (TF_PIPELINE + consumed).encode()
    settings = Settings(select=["GL702"], target_tensorflow=(2, 12))  # (before TensorFlow prefetched by itself)
    assert Linter(settings, trigger_filter=True).lint_source(source, "data.py").parsed == parsed


@pytest.mark.parametrize(
    "target, opts_out, parsed",
    [
        ((2, 12), "", True),  # TensorFlow does not prefetch by itself
        (None, "", False),  # today's does (a version not known is today's)
        ((2, 16), "", False),
        ((2, 16), "options.experimental_optimization.inject_prefetch = False\n", True),
        ((2, 16), "options.autotune.enabled = False\n", True),
    ],
)
def test_where_tensorflow_prefetches_by_itself_gl702_runs_only_on_code_that_turns_it_off(target, opts_out, parsed):
    source = (TF_PIPELINE + "options = tf.data.Options()\n" + opts_out + "model.fit(ds, epochs=3)\n").encode()
    settings = Settings(select=["GL702"], target_tensorflow=target)
    assert Linter(settings, trigger_filter=True).lint_source(source, "data.py").parsed == parsed
    assert Linter(settings, trigger_filter=False).lint_source(source, "data.py").parsed  # (the switch: every file)


@pytest.mark.parametrize("rule", [r for r in RULES if r.tokens_if_prefetch_injected], ids=lambda rule: rule.code)
def test_every_invalid_case_where_tensorflow_prefetches_spells_the_rules_words(rule):
    """A rule's `tokens_if_prefetch_injected` is what its findings need where TensorFlow prefetches
    by itself: every INVALID case there spells one (and some case is there)."""
    from gpulint.linter.analysis.vocabulary import tensorflow_injects_prefetch

    there = [case for case in rule.INVALID if tensorflow_injects_prefetch(case.target_tensorflow)]
    assert there, f"{rule.code}: no INVALID case where TensorFlow prefetches by itself"
    for case in there:
        assert any(token in case.source for token in rule.tokens_if_prefetch_injected), case.source


def test_every_way_to_turn_the_injected_prefetch_off_spells_one_of_its_words():
    """Each alternative of the pattern that reads the opt-out holds one of the prefilter's words,
    as written (an alternative added without one fails here)."""
    from gpulint.linter.analysis.vocabulary import OPTS_OUT_OF_PREFETCH, OPTS_OUT_OF_PREFETCH_TOKENS

    pattern = OPTS_OUT_OF_PREFETCH.pattern
    assert pattern.startswith("(") and pattern.count("(") == 1, "read the alternatives another way"
    alternatives = pattern[1 : pattern.index(")")].split("|")
    assert len(alternatives) >= 2
    for alternative in alternatives:
        assert any(token in alternative for token in OPTS_OUT_OF_PREFETCH_TOKENS), alternative


def test_the_switch_turns_the_filter_off(monkeypatch):
    monkeypatch.setenv(IGNORE_TRIGGERS, "1")
    assert not Linter(Settings()).trigger_filter
    monkeypatch.setenv(IGNORE_TRIGGERS, "")
    assert Linter(Settings()).trigger_filter


# -- identical results over the code in the repository --------------------------------------------
def _case_tree(root: Path) -> Path:
    """Every rule case (VALID and INVALID) as a file of its own, in one folder."""
    folder = root / "cases"
    folder.mkdir()
    for rule in RULES:
        for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for index, case in enumerate(cases):
                (folder / f"{rule.code}_{kind}_{index}.py").write_text(case.source, encoding="utf-8")
    return folder


def _check(args: list[str], capsys, monkeypatch, ignore_triggers: bool) -> str:
    monkeypatch.setenv(IGNORE_TRIGGERS, "1" if ignore_triggers else "")
    _, out, _ = run_cli(["check", "--no-cache", "--jobs", "2", *args], capsys)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("what", ["findings", "fixes"])
def test_findings_and_fixes_are_identical_with_and_without_the_filter(tmp_path, capsys, monkeypatch, what):
    # Copies: linted in place, the fixtures' project is this whole repository, which each of the
    # four runs would index again (the same code either way, so the comparison is unchanged).
    ignore = shutil.ignore_patterns("__pycache__")
    trees = [shutil.copytree(tree, tmp_path / tree.name, ignore=ignore) for tree in (FIXTURES, SCRIPTS)]
    trees = [str(tree) for tree in (*trees, _case_tree(tmp_path))]
    # findings with the edits of their fixes; the fixes applied (unsafe ones too), as a diff
    args = ["--select", "ALL", "--lint-tests"]
    args += ["--format", "json"] if what == "findings" else ["--unsafe-fixes", "--diff"]
    monkeypatch.chdir(tmp_path)
    with_filter = _check([*args, *trees], capsys, monkeypatch, ignore_triggers=False)
    without = _check([*args, *trees], capsys, monkeypatch, ignore_triggers=True)
    assert with_filter == without
    assert len(with_filter) > 10_000  # (the runs reported something)


def test_the_lint_reads_the_shapes_the_project_index_measured(monkeypatch):
    from gpulint.linter.analysis import parse_guard

    source = DOCSTRING_ONLY + b"loaders = [torch.utils.data.DataLoader(part) for part in parts]\n" * 10
    assert len(source) >= parse_guard.MAX_NESTING  # (the index keeps what it measured of such sources)
    parse_guard.index_tree(source, 50_000)
    parses = []
    monkeypatch.setattr(parse_guard, "python_tree", lambda *args, **kwargs: parses.append(args))
    measured = parse_guard.measure(source, 50_000, frozenset({"DataLoader", ".backward("}))
    assert parses == []  # one CPython parse per file: the index's
    assert measured.shapes is not None
    assert "DataLoader" in measured.shapes and ".backward(" not in measured.shapes  # (the docstring's)


# -- `.apply(`: a training step only on what may be an optimizer ---------------------------------
INIT_WEIGHTS = textwrap.dedent(
    """
    import torch


    def build(model):
        model.apply(init_weights)  # a module's apply: no training step
        return torch.autograd.Function.apply(model.cuda())
    """
)


@pytest.mark.parametrize(
    "source, steps",
    [
        (INIT_WEIGHTS, False),
        (INIT_WEIGHTS + "\n\ndef update(optimizer, grads, weights):\n    optimizer.apply(grads, weights)\n", True),
        # a receiver of any name, in a module that names an optimizer's module (Keras 3)
        (INIT_WEIGHTS + "\n\nupdater = keras.optimizers.Adam()\nupdater.apply(grads)\n", True),
        (INIT_WEIGHTS + "\n\nfrom torch import optim\n", True),
    ],
)
def test_apply_is_a_step_shape_only_on_what_may_be_an_optimizer(source, steps):
    wanted = frozenset(catalog.FACT_SHAPES["takes training steps"])
    assert bool(code_shapes(ast.parse(source), wanted)) == steps


def test_a_module_whose_only_apply_is_a_modules_is_not_parsed_for_the_step_rules():
    source = (INIT_WEIGHTS * 20).encode()  # (long enough for the guard to measure it)
    linter = Linter(Settings(select=["GL201", "GL301", "GL302"]), trigger_filter=True)
    assert not linter.lint_source(source, "helpers.py").parsed
    assert (
        Linter(Settings(select=["GL201", "GL301", "GL302"]), trigger_filter=False)
        .lint_source(source, "helpers.py")
        .parsed
    )


# -- code that may run per step (STEP_LOOP) -------------------------------------------------------
def _steps_per_step(source: str) -> bool:
    """STEP_LOOP's answer for a source."""
    return STEP_LOOP in code_shapes(ast.parse(source), frozenset({STEP_LOOP}), source)


def _model_runs_code_per_step(source: str) -> bool:
    """The loop model's: a call in its step loops or per-step functions (the step call itself is
    one), or a Lightning `training_step` (loops.LoopModel)."""
    ctx = FileContext(cst.parse_module(source), "t.py", {}, frozenset({"Call"}))
    loops = ctx.loops
    return bool(loops.lightning_steps) or any(loops.per_step(call) for call in ctx.index.nodes("Call"))


def _sources_with_loops() -> list[tuple[str, str]]:
    """Every rule case, fixture and fixed script of the repository: (name, source)."""
    found = [
        (f"{rule.code} case {i}", case.source) for rule in RULES for i, case in enumerate(rule.VALID + rule.INVALID)
    ]
    for folder in (FIXTURES, SCRIPTS):
        found += [(path.name, path.read_text()) for path in sorted(folder.rglob("*.py"))]
    return found


def test_step_loop_holds_wherever_the_loop_model_finds_code_run_per_step():
    """STEP_LOOP must over-approximate the model (its per-step rules fire only where the model
    finds per-step code); and it must rule some code out, or it is worth nothing."""
    ruled_out = 0
    for name, source in _sources_with_loops():
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        if _model_runs_code_per_step(source):
            assert _steps_per_step(source), f"{name}: the loop model runs code per step, STEP_LOOP says not"
        elif not _steps_per_step(source):
            ruled_out += 1
    assert ruled_out >= 50


@pytest.mark.parametrize(
    "code, steps",
    [
        ("for batch in loader:\n    loss.backward()\n", True),
        ("loss.backward()\noptimizer.step()\n", False),  # straight-line: one step
        ("def train_step(batch):\n    loss.backward()\n", True),  # a step function
        ("def test_grads():\n    loss.backward()\n", False),  # a test takes one step
        ("def test_grads():\n    def step():\n        loss.backward()\n", True),  # a function inside a test
        ("class M(L.LightningModule):\n    def training_step(self, batch):\n        return 0\n", True),
        ("f = lambda: loss.backward()\n", True),
        # a loop that runs fewer than 20 steps, as literals say, in a test or the module: a smoke test
        ("def test_fit():\n    for _ in range(3):\n        loss.backward()\n", False),
        ("for flag in (True, False):\n    for i in enumerate([1, 2, 3]):\n        loss.backward()\n", False),
        ("def test_fit():\n    for _ in range(20):\n        loss.backward()\n", True),
        ("def test_fit():\n    for _ in range(4):\n        for _ in range(5):\n            loss.backward()\n", True),
        ("def test_fit():\n    for _ in range(n):\n        loss.backward()\n", True),  # (not a literal)
        ("from mylib import range\nfor _ in range(3):\n    loss.backward()\n", True),  # not the builtin
        ("def test_fit():\n    while True:\n        loss.backward()\n", True),
        # a test something here calls (it may run in a loop), or that also steps once outside its loop
        ("def test_fit():\n    for _ in range(3):\n        loss.backward()\nfor _ in data:\n    test_fit()\n", True),
        ("def test_fit():\n    loss.backward()\n    for _ in range(3):\n        loss.backward()\n", True),
        # an `else:` runs once after the loop, not on each iteration
        ("for _ in range(30):\n    for _ in ():\n        pass\n    else:\n        loss.backward()\n", True),
        # a loop of the module after a test function is no loop of that test's
        ("def test_h():\n    for _ in ():\n        pass\nfor _ in range(25):\n    loss.backward()\n", True),
        # a loop around a definition runs the definition, not the body
        ("for _ in range(99):\n    def test_once():\n        loss.backward()\n", False),
        # `.apply(` is a step only on what may be an optimizer
        ("def init(model):\n    model.apply(init_weights)\n", False),
        ("from torch import optim\ndef init(model):\n    model.apply(init_weights)\n", True),
    ],
)
def test_step_loop_is_code_that_may_run_per_step(code, steps):
    assert _steps_per_step(code) == steps
    if not steps:
        assert not _model_runs_code_per_step(code)  # (what the model says too)


def test_step_loop_needs_the_source_to_call_a_loop_in_a_test_short():
    code = "def test_fit():\n    for _ in range(3):\n        loss.backward()\n"
    assert STEP_LOOP in code_shapes(ast.parse(code), frozenset({STEP_LOOP}))  # (no source: who calls it is unknown)


# -- a DataLoader built (LOADER_BUILT) --------------------------------------------------------------
def test_loader_built_holds_wherever_a_dataloader_is_built():
    """What GL101-GL103 and GL605 report is a construction pytorch.is_dataloader recognises."""
    ruled_out = 0
    for name, source in _sources_with_loops():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        built = LOADER_BUILT in code_shapes(tree, frozenset({LOADER_BUILT}), source)
        ctx = FileContext(cst.parse_module(source), "t.py", {}, frozenset({"Call"}))
        if any(is_dataloader(ctx, call) for call in ctx.index.nodes("Call")):
            assert built, f"{name}: a DataLoader is built, LOADER_BUILT says not"
        elif not built and "DataLoader" in source:
            ruled_out += 1
    assert ruled_out >= 3


@pytest.mark.parametrize(
    "code, built",
    [
        ("from torch.utils.data import DataLoader\nloader = DataLoader(ds)\n", True),
        ("import torch\nloader = torch.utils.data.DataLoader(ds)\n", True),
        ("from torch.utils.data import DataLoader as DL\nloader = DL(ds)\n", True),
        ("loader = DL(ds)\nfrom torch.utils.data import DataLoader as DL\n", True),  # (bound below its use)
        # the name in an import and annotations only: the loaders are another class
        (
            "from torch.utils.data import DataLoader\ndef train_dataloader(self) -> DataLoader:\n"
            "    return StreamingDataLoader(ds)\n",
            False,
        ),
        ("from torch.utils.data import DataLoader\ndef f(loader: DataLoader):\n    pass\n", False),
    ],
)
def test_loader_built_is_a_call_of_dataloader(code, built):
    assert (LOADER_BUILT in code_shapes(ast.parse(code), frozenset({LOADER_BUILT}), code)) == built


# -- a factory's tensor copied where it may run again and again (REPEATED_COPY) -------------------
@pytest.mark.parametrize(
    "code, repeated",
    [
        ("x = torch.ones(6).to(device)\n", False),  # module code: once
        ("def test_generate():\n    x = torch.ones(6).to(device)\n", False),  # a test: once
        ("def test_generate():\n    for _ in range(2):\n        x = torch.ones(6).to(device)\n", True),
        ("def embed(n):\n    return torch.arange(n).cuda()\n", True),  # a function: any loop may call it
        ("def test_a():\n    x = torch.ones(6).to(device)\nfor _ in data:\n    test_a()\n", True),
        # Lightning's `test_step` is called per batch: no test function
        ("class M(L.LightningModule):\n    def test_step(self, batch):\n        return torch.ones(6).cuda()\n", True),
        ("for _ in data:\n    x = torch.ones(6).to(device)\n", True),
    ],
)
def test_repeated_copy_is_a_factory_copy_that_may_run_again_and_again(code, repeated):
    assert (REPEATED_COPY in code_shapes(ast.parse(code), frozenset({REPEATED_COPY}), code)) == repeated
    if not repeated:
        ctx = FileContext(cst.parse_module(code), "t.py", {}, frozenset({"Call"}))
        copies = [call for call in ctx.index.nodes("Call") if getattr(call.func, "attr", None) is not None]
        assert not any(ctx.loops.runs_repeatedly(call) for call in copies)  # (what the model says too)


@pytest.mark.parametrize(
    "code, found",
    [
        ("batch = next(iter(loader))\n", {"next(iter("}),
        ("n = len(list(loader))\n", {"len(list("}),
        ("it = iter(loader)\nbatch = next(it)\nn = len(items)\n", set()),  # apart: not what GL105 reports
        ("batch = next(loader.iter())\n", set()),
    ],
)
def test_a_call_of_a_call_is_its_own_shape(code, found):
    assert code_shapes(ast.parse(code), frozenset({"next(iter(", "len(list("})) == found
