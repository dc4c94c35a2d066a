"""What start-up needs to know about the rules without importing them.

The rule classes (gpulint/rules/) are the one place a rule is declared, but they need libcst, whose
import is most of gpulint's start-up.  Selection, configuration, listings and the engine's
prefilter need only plain facts about each rule, so those are kept here: a file that spells no
rule's facts and tokens is rejected, and a run over such files finishes, without libcst ever being
imported.  The part below the marker is generated from the rule classes and the facts they require
(analysis/facts.py) by scripts/gen_docs.py (`make docs`); a test fails when it is stale.

The engine imports no rule module but through an entry: each names its class (`implementation`),
imported by `load_rule` when the rule is about to run, so a run imports the modules of the rules
it runs and no other.  Reports that describe rules (SARIF's rule help) read the entries, and the
explanations generated beside them (rule_help.py).

RuleOption lives here too (rules declare their options with it, and import it from
gpulint.linter.rule): the configuration checks option values against it without the rule classes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from gpulint.linter.option_expression import UnsafeExpression, check_worker_expression


@dataclass(frozen=True)
class RuleOption:
    """A `[tool.gpulint]` setting rules read (`num-workers`, `log-every`, ...), declared once and
    listed in the `options` of every rule that reads it."""

    key: str
    default: Any
    help: str
    type: type = str
    # Says what is wrong with a value (raises ValueError with the reason); None accepts any value of `type`.
    check: Callable[[str, Any], None] | None = field(default=None, compare=False)

    def validate(self, value: Any) -> None:
        if self.check is not None:
            self.check(self.key, value)


def positive_int(key: str, value: Any) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"`{key}` must be a positive integer, not {value!r}")


def worker_expression(key: str, value: Any) -> None:
    """An expression a fix writes into the user's code: only the small grammar of
    option_expression.py (the value arrives with the repository, so it must not plant code)."""
    try:
        check_worker_expression(str(value))
    except UnsafeExpression as exc:
        raise ValueError(f"`{key}` = {str(value)!r} is not accepted: {exc}") from None


# code_shapes.STEP_LOOP as a group of its own (spelled here: listings import no analysis module;
# tests/test_step_region.py checks the two agree).
_STEP_LOOP_GROUP = ("for ...: loss.backward()",)


@dataclass(frozen=True)
class RuleInfo:
    """A rule as selection, listings and the prefilter see it (named as the rule class's attributes)."""

    code: str
    name: str
    default: str  # "on", or "hint" (opt-in)
    fix: str | None  # the fix it can offer: "safe", "unsafe" or None
    message: str  # what the rule finds in one line, no placeholders: what listings show
    summary: str  # the explanation's first paragraph, for short listings
    facts: tuple[str, ...] = ()  # the required facts a file must spell (keys of FACT_TOKENS)
    tokens: tuple[str, ...] = ()  # one of these must occur: the text of the rule's own pattern
    # The code shapes the rule may fire on (Rule.triggers): one of every group; None: any code.
    triggers: tuple[tuple[str, ...], ...] | None = None
    # How many trigger groups, from the first, hold in a module the project tells about too (Rule.site_triggers).
    site_triggers: int = 0
    # The prefilter's tokens where the project's TensorFlow injects tf.data's final prefetch
    # (Rule.tokens_if_prefetch_injected); (): `tokens` whatever the version.
    tokens_if_prefetch_injected: tuple[str, ...] = ()
    # Whether its findings are reported in test files when `lint-tests` is off (Rule.reported_in_tests):
    # the other rules are not run there at all.
    reported_in_tests: bool = False
    # Whether its findings are hints by default (Rule.hint_by_default): held back unless shown.
    hint_by_default: bool = False
    # Where the rule class is: "module:Class" (`load_rule`); "" for a local rule (loaded from its file).
    implementation: str = ""
    # The rule's explanation (its docstring, Markdown) is in rule_help.py, generated beside this.

    @property
    def listed_default(self) -> str:
        """The default as listings show it: "on", "hint" (opt-in), or "held" (on, its findings held
        back as hints unless shown)."""
        return "held" if self.hint_by_default else self.default

    def may_apply(self, source: bytes, fact_may_hold: Callable[[str], bool]) -> bool:
        """The prefilter: the source's bytes can hold every required fact, and one of the tokens."""
        return all(fact_may_hold(fact) for fact in self.facts) and (
            not self.tokens or any(token.encode() in source for token in self.tokens)
        )

    def may_fire(
        self,
        shapes: frozenset[str],
        view_may_make: Callable[[str, frozenset[str]], bool] | None = None,
        per_step_shapes: frozenset[str] | None = None,
    ) -> bool:
        """The trigger filter: the module's code (its shapes, analysis/code_shapes.py) holds one
        shape of every trigger group, and one of the shapes of every required fact that has some.

        `view_may_make(fact)`, for a module the rest of the project says something about: whether
        its project view may make the fact hold.  There a rule may fire on code that holds none of
        its triggers (a helper another module runs per step), so only the groups of the code the
        module must hold itself (its first `site_triggers`) and its facts are checked, and a fact
        the view may make hold needs no shape.

        `per_step_shapes`, for such a module whose only per-step code is what another module runs
        (analysis/step_region.py): the shapes of that code.  A rule that reports per-step work only
        (`reports_per_step_only`) may fire only there: its site groups must hold in that code, and
        STEP_LOOP (there is some)."""
        held = shapes
        groups = self.triggers if view_may_make is None else (self.triggers or ())[: self.site_triggers]
        if per_step_shapes is not None and self.reports_per_step_only:
            held, groups = per_step_shapes, (*(groups or ()), _STEP_LOOP_GROUP)
        if groups is not None and not all(held.intersection(group) for group in groups):
            return False
        return all(
            shapes.intersection(FACT_SHAPES[fact]) or (view_may_make is not None and view_may_make(fact, shapes))
            for fact in self.facts
            if fact in FACT_SHAPES
        )

    @property
    def reports_per_step_only(self) -> bool:
        """A trigger group of STEP_LOOP alone: the rule reports only code the loop model runs per
        step (loops.LoopModel.per_step_work; tests/test_step_region.py checks each such rule)."""
        return _STEP_LOOP_GROUP in (self.triggers or ())

    def site_shapes(self) -> frozenset[str]:
        """The shapes of its site groups (the first `site_triggers`)."""
        return frozenset(shape for group in (self.triggers or ())[: self.site_triggers] for shape in group)

    def shapes(self) -> frozenset[str]:
        """Every shape the trigger filter asks about for this rule."""
        named = {shape for group in self.triggers or () for shape in group}
        facts = [(*FACT_SHAPES.get(fact, ()), *FACT_THROUGH_CALLS.get(fact, ())) for fact in self.facts]
        return frozenset(named.union(*facts))


def trigger_vocabulary(rules: Iterable[RuleInfo]) -> frozenset[str]:
    """Every shape the trigger filter asks about for these rules (what a module's walk keeps)."""
    return _vocabulary(tuple(rules))


@lru_cache(maxsize=256)
def _vocabulary(rules: tuple[RuleInfo, ...]) -> frozenset[str]:
    return frozenset().union(*(rule.shapes() for rule in rules))


@cache
def load_rule(entry: RuleInfo) -> Any:
    """The rule class a built-in entry names (importing its module, and libcst with it)."""
    if not entry.implementation:
        raise ValueError(f"{entry.code} names no rule class to import (a local rule is loaded from its file)")
    module, _, name = entry.implementation.partition(":")
    return getattr(importlib.import_module(module), name)


def by_code() -> dict[str, RuleInfo]:
    return {rule.code: rule for rule in RULES}


# A file that names none of these is not training code for any rule here.
FRAMEWORK_MARKERS = (b"torch", b"tensorflow", b"keras", b"lightning", b"transformers", b"accelerate", b"tf.")


def spelled_rules(source: bytes, rules: Iterable[RuleInfo], project: Any = None) -> list[RuleInfo]:
    """The prefilter: the rules whose facts and tokens the source's bytes can hold (or its project
    view, analysis/project.py ModuleView, makes hold)."""
    if not any(marker in source for marker in FRAMEWORK_MARKERS) and not (
        project is not None and project.torch_loop_elsewhere  # a helper of a torch training loop
    ):
        return []
    known: dict[str, bool] = {}

    def may_hold(fact: str) -> bool:  # each fact's tokens are searched for once per file
        if fact not in known:
            known[fact] = fact_may_hold(fact, source, project)
        return known[fact]

    return [rule for rule in rules if rule.may_apply(source, may_hold)]


def fact_may_hold(fact: str, source: bytes, project: Any = None) -> bool:
    """Whether the source spells one of the fact's tokens (a necessary condition for it to hold),
    or the module's project view (analysis/project.py ModuleView) makes the fact hold."""
    elsewhere = FACT_ELSEWHERE.get(fact)
    if elsewhere is not None and project is not None and getattr(project, elsewhere):
        return True
    return any(token in source for token in FACT_TOKENS[fact])


GENERATED_BELOW = "# -- generated by scripts/gen_docs.py from the rule classes: do not edit below --"
# -- generated by scripts/gen_docs.py from the rule classes: do not edit below --

RULES: tuple[RuleInfo, ...] = (
    RuleInfo(
        code='GL000',
        name='syntax-error',
        default='on',
        fix=None,
        message='SyntaxError: the file does not parse, so it was not checked',
        summary=(
            'A file gpulint was going to check that does not parse as Python: it could not be '
            'checked at all, so no other rule reports anything in it. The finding is where '
            'the parser stopped, with its message. A file is parsed only when a selected rule '
            'may apply to it (it names a framework and what the rule looks for), so a file '
            'that imports nothing gpulint knows is not parsed and not reported. In a notebook '
            'the finding is per cell, and what IPython runs is not an error: magics and shell '
            'lines, a one-line cell calling an automagic without its `%` (`ls ./data`), and a '
            'cell indented as a whole (IPython dedents it; gpulint leaves it out).'
        ),
        reported_in_tests=True,
        implementation='gpulint.rules.meta.syntax_error:SyntaxErrorRule',
    ),
    RuleInfo(
        code='GL101',
        name='dataloader-serial',
        default='on',
        fix='unsafe',
        message=(
            'DataLoader loads batches in the training process (no `num_workers`): the GPU '
            'waits for every batch'
        ),
        summary=(
            'A `torch.utils.data.DataLoader` created without `num_workers`, or with '
            '`num_workers=0` (also through a `**kwargs` dictionary built in the module, or '
            'one a conditional expression picks: `{"num_workers": 1} if use_cuda else {}`), '
            "whose items cost real work to load: its dataset's `__getitem__` (or `__iter__`) "
            'opens or decodes a file (`open`, `PIL.Image.open`, `cv2.imread`, '
            '`torchvision.io.read_image`, `torchaudio.load`, `np.load`, `h5py.File`, ...), '
            'applies image transforms or tokenizes each item, or the dataset is one that '
            'decodes its files (`ImageFolder`, a torchvision dataset given a `transform=`, a '
            'Hugging Face dataset with `with_transform`). The message names what an item does '
            'and where. The rule is about the host: it applies whether or not the module '
            'names an accelerator.'
        ),
        facts=('imports torch',),
        tokens=('DataLoader',),
        triggers=(
            ('DataLoader(...)',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.data_pipeline.dataloader_serial:DataLoaderSerial',
    ),
    RuleInfo(
        code='GL102',
        name='dataloader-unpinned',
        default='on',
        fix='safe',
        message=(
            'DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot '
            'overlap compute'
        ),
        summary=(
            'A `DataLoader` without `pin_memory=True` (absent or `False`) in a module that '
            "trains on an accelerator, whose batches are decoded data: its dataset's items "
            'open or decode files (`PIL.Image.open`, `cv2.imread`, `torchaudio.load`, '
            '`np.load`, ...), or go through image transforms, or the dataset is one that '
            'decodes (`ImageFolder`, a torchvision dataset given a `transform=`). The message '
            'names what an item does and where.'
        ),
        facts=('imports torch', 'runs on an accelerator'),
        tokens=('DataLoader',),
        triggers=(
            ('DataLoader(...)',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.data_pipeline.dataloader_unpinned:DataLoaderUnpinned',
    ),
    RuleInfo(
        code='GL103',
        name='dataloader-respawn',
        default='on',
        fix='safe',
        message='DataLoader workers are started again every epoch; set `persistent_workers=True`',
        summary=(
            'A `DataLoader` with worker processes (`num_workers` set and not 0) and without '
            '`persistent_workers=True`, whose batches are iterated again and again: in a loop '
            'inside an epoch loop, by a function called from a loop, passed to a call inside '
            'a loop, or returned by `train_dataloader()` / `val_dataloader()` (Lightning '
            'iterates those every epoch) -- also a loader a function or method of the module '
            'builds and returns (`def make_loader(ds): return DataLoader(...)`), followed to '
            'the name its caller keeps it in. A function a loop calls that builds its loader '
            'on every call, itself or through such a factory into a name of its own (`data = '
            'self.load_data(files)`, once per split), iterates a new loader each time: its '
            'workers start once for their one pass, and it is not reported. The workers may '
            "be any value that is not 0: a literal, a command line's, a configuration's "
            'attribute (`num_workers=self.config.workers`). Keywords may come through a '
            '`**kwargs` dictionary built in the module. The rule is about the host: it '
            'applies whether or not the module names an accelerator. A run of a single epoch '
            "(Lightning's `max_epochs=1`, an epoch loop over `range(1)`, or over "
            '`range(args.epochs)` where `--epochs` defaults to 1, declared in the module or '
            'by a function of another module it calls for its parser: `parser = '
            'get_argument_parser()`) starts its workers once, and is not reported. Where the '
            'workers come from a command-line option that defaults to 0 '
            '(`num_workers=args.dataloader_num_workers`), none start unless the run asks for '
            'them: the finding is a hint, held back unless hints are shown.'
        ),
        facts=('imports torch',),
        tokens=('DataLoader',),
        triggers=(
            ('DataLoader(...)',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.data_pipeline.dataloader_respawn:DataLoaderRespawn',
    ),
    RuleInfo(
        code='GL104',
        name='blocking-h2d-copy',
        default='on',
        fix='safe',
        message='batch copied to the GPU without `non_blocking=True`: the host waits for every copy',
        summary=(
            'A batch moved to the accelerator with `.to(device)`, `.cuda()` or '
            '`.type(torch.cuda.LongTensor)` inside a training step loop without '
            '`non_blocking=True` (also a view of it, `x.reshape(...)`, or a slice, in a loop '
            'nested in the loop over batches). A tensor an earlier statement of the step '
            'already moved is not copied again and is not reported, nor is a copy in a module '
            'where Accelerate places the batches (an `Accelerator` with `device_placement` '
            'left on, its default, and `accelerator.prepare(loader)`: the prepared loader '
            'yields batches already on the device), nor a copy of an output of a DALI '
            "iterator (`DALIGenericIterator`, `DALIClassificationIterator`) that the module's "
            'pipeline makes on the GPU -- a `device="mixed"` decoder, a `device="gpu"` '
            'operator or one given a GPU input, `.gpu()` -- or whose device the module does '
            'not show: DALI hands GPU outputs over as CUDA tensors. Outputs the pipeline '
            "makes on the host (the reader's labels) are reported. A batch is what the step "
            'loop iterates (`for x, y in loader`), what is unpacked or indexed from it (`x, y '
            '= batch`, `batch["input_ids"]`, `batch.pop("input_ids")`, the values of a `{k: '
            'v.to(device) for k, v in batch.items()}`), or a batch parameter of a step '
            'function. Copies in one statement (`x, y = x.to(d), y.to(d)`) are one finding '
            'that counts them, with one fix for all. Where the module names no GPU (it moves '
            'the batch to a device it is handed, which may be the host) the message says "the '
            'device".'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('.to(', '.cuda('),
        triggers=(
            ('.to(', '.cuda(', '.type('),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.data_pipeline.blocking_h2d_copy:BlockingHostToDeviceCopy',
    ),
    RuleInfo(
        code='GL105',
        name='loader-reiterated',
        default='on',
        fix=None,
        message=(
            'DataLoader iterated just to count or sample it: every call loads batches (and '
            'starts workers) again'
        ),
        summary=(
            'A `DataLoader` iterated only to count or peek at it: `len(list(loader))` (or '
            '`tuple`), and `next(iter(loader))` inside a loop -- also in an epoch function, '
            'one that iterates the same loader and is called from a loop of the module (`b_sz '
            '= len(next(iter(self.train_data))[0])` at the top of `_run_epoch`).'
        ),
        facts=('imports torch',),
        tokens=('DataLoader',),
        triggers=(
            ('len(list(', 'len(tuple(', 'next(iter('),
            ('DataLoader',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.data_pipeline.loader_reiterated:LoaderReiterated',
    ),
    RuleInfo(
        code='GL201',
        name='host-sync-in-loop',
        default='on',
        fix='unsafe',
        message=(
            'a tensor read back to the host (`.item()`, `.cpu()`, `float()`) in the training '
            'loop makes the CPU wait for the GPU every step'
        ),
        summary=(
            'A value read back from the GPU inside a training step loop, not under an '
            'interval guard, in a PyTorch module that trains on an accelerator: `.item()`, '
            '`.cpu()`, `.numpy()` and `.tolist()` on a tensor; `float(loss)` / `int(correct)` '
            'of a tensor; a tensor formatted into a string: `f"{loss}"`, `"%f" % loss`, '
            '`"{}".format(loss)`, `str(loss)`; a NaN/Inf check used as a condition: `if '
            'torch.isnan(loss)`, `if not torch.isfinite(loss).all()`; any other tensor used '
            'as a Python condition: `if loss > 10:`, `while err > tol:`, `if (pred == '
            'y).all():`, `if torch.equal(a, b):` (the condition is reported, not its body); '
            'counting what a mask or `nonzero` selects: `len(t[mask])`, `t[t > 0].shape[0]`, '
            '`torch.nonzero(t).size(0)` -- the size of the result is only known on the GPU.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        triggers=(
            ('loss.item()',),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.syncs.host_sync_in_loop:HostSyncInLoop',
    ),
    RuleInfo(
        code='GL202',
        name='model-transfer-in-loop',
        default='on',
        fix=None,
        message='the model is moved to the device on every training step; move it once before the loop',
        summary=(
            '`model.to(device)` or `model.cuda()` on a model (a name such as `model`, `net`, '
            '`encoder`, `self.model`) inside a training step loop, not under an interval '
            'guard. Held back unless hints are shown (a hint on the finding says why): a move '
            'in a loop the code bounds to fewer than 50 steps, and one the same step undoes '
            'on purpose (`vae.cpu()` or `vae.to("cpu")` there too, often under an offload '
            'flag): where the flag is off the move only walks the parameters.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('.to(', '.cuda('),
        triggers=(
            ('.to(', '.cuda('),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.syncs.model_transfer_in_loop:ModelTransferInLoop',
    ),
    RuleInfo(
        code='GL203',
        name='host-tensor-then-copy',
        default='on',
        fix='safe',
        message=(
            'a tensor built on the host and then copied to the device; pass `device=` to the '
            'factory instead'
        ),
        summary=(
            'A tensor built on the host by a factory and then copied to the accelerator, '
            'where it is built repeatedly -- in a loop, in `forward()` (or another method a '
            'framework calls per batch), in a step function, or in a function of the module '
            'called from one of those: `torch.zeros(n).to(device)`, `torch.arange(n).cuda()`, '
            'also through host-side methods or a subscript '
            '(`torch.arange(n)[None].to(device)`, `torch.randn(n).contiguous().cuda()`), from '
            'a legacy constructor (`torch.LongTensor(x)`), from a name every assignment of '
            'which is such a factory (its own copy, `z = z.type_as(x)`, aside), and with '
            '`.type_as(t)`.'
        ),
        facts=('imports torch', 'runs on an accelerator'),
        tokens=('.to(', '.cuda('),
        triggers=(
            ('torch.zeros(...).to(',),
            (
                'for',
                'while',
                '__call__',
                '__getitem__',
                'call',
                'forward',
                'predict_step',
                'test_step',
                'training_step',
                'validation_step',
                '.apply_gradients(',
                '.backward(',
                '.gradient(',
                '.manual_backward(',
                '.step(',
                '.train_on_batch(',
                'optimizer.apply(',
            ),
            ('for ...: torch.zeros(...).to(',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.syncs.host_tensor_then_copy:HostTensorThenCopy',
    ),
    RuleInfo(
        code='GL204',
        name='synchronize-in-loop',
        default='on',
        fix=None,
        message='`synchronize()` in the training loop makes the CPU wait for the GPU every step',
        summary=(
            "`torch.cuda.synchronize()` (or `torch.accelerator.synchronize()`, a stream's "
            '`.synchronize()`) inside a training step loop, not under an interval guard, '
            'where the loop does not time anything (no `time.perf_counter()`, `time.time()` '
            'or CUDA event timing in the loop, nor in the loop that calls the step function '
            "holding it, nor in a function of the project the loop calls). Where the timer's "
            'code is not in sight (a class of a module not linted), the statement right after '
            'the synchronize says it: a call of a timer, by its name (`ips = '
            'perf_meter.update(n)`, `timer.lap()`), reads the time the synchronize waited '
            'for, and the synchronize is not reported. In a loop the code bounds to fewer '
            'than 50 steps the finding carries a hint and is held back unless hints are '
            'shown.'
        ),
        facts=('imports torch', 'takes training steps'),
        tokens=('synchronize',),
        triggers=(
            ('synchronize',),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.syncs.synchronize_in_loop:SynchronizeInLoop',
    ),
    RuleInfo(
        code='GL205',
        name='empty-cache-in-loop',
        default='on',
        fix=None,
        message=(
            "`empty_cache()` on every training step: the allocator's cache is freed (a "
            'device-wide sync) and allocated again each step'
        ),
        summary=(
            '`torch.cuda.empty_cache()` (or its `xpu`/`mps` form) on every training step: in '
            'a step loop or a step function, unconditionally -- not under an `if` (an '
            'interval, a memory threshold, a mode setting: a deliberate policy) and not in '
            'the handling of a rare event (an `except` for an out-of-memory error). In a loop '
            'the code bounds to fewer than 50 steps the finding carries a hint and is held '
            'back unless hints are shown.'
        ),
        facts=('imports torch', 'takes training steps'),
        tokens=('empty_cache',),
        triggers=(
            ('empty_cache',),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.syncs.empty_cache_in_loop:EmptyCacheInLoop',
    ),
    RuleInfo(
        code='GL301',
        name='per-step-validation',
        default='on',
        fix='unsafe',
        message='validation runs on every training step; run it every N steps or once per epoch',
        summary=(
            'A call that evaluates the model -- `evaluate(...)`, `validate(...)`, '
            '`run_validation(...)`, `model.eval()` -- inside a training step loop, not under '
            'an interval guard. In full-batch training (the step loop iterates epochs: one '
            'optimizer step per epoch, also through a step function called once per epoch, or '
            'a `tqdm(range(n))` loop that trains on the same data every step) it runs once '
            'per epoch, and is not reported. Nor is `model.eval()` followed in its block by a '
            "training step: one network is put in eval mode for another's step (a GAN's "
            'phases). In a loop the code bounds to fewer than 50 steps the finding carries a '
            'hint and is held back unless hints are shown.'
        ),
        facts=('takes training steps',),
        tokens=('eval', 'valid', 'test'),
        triggers=(
            ('evaluate(...)',),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.per_step.per_step_validation:PerStepValidation',
    ),
    RuleInfo(
        code='GL302',
        name='per-step-logging',
        default='on',
        fix='unsafe',
        message='logging runs on every training step; log every N steps',
        summary=(
            '`print(...)`, `logging`/`logger.info(...)`, `wandb.log(...)`, TensorBoard '
            '`writer.add_*(...)`, `mlflow.log_*(...)` and `dllogger.log(...)` inside a '
            'training step loop, not under an interval guard. A progress mark -- `print(".", '
            'end="")`, constant text that does not end the line -- reads nothing back and '
            'writes a byte: it is not reported. Nor is logging in a loop of a handful of '
            'steps (fewer than 20 known statically: `range(15)`, a default argument, '
            '`num_batches = 3`), or under a condition that reads the data (`if loss > 10:`), '
            'which does not run every step, or in the `else` of a condition (not an interval) '
            'whose body takes the step: a skipped bad batch. Nor logging that runs once per '
            'epoch or episode however often the optimizer steps: full-batch training (one '
            'step per epoch, as GL301 tells it), or a log after a loop that steps an '
            'environment (`while not done: ... env.step(action)`), where each iteration of '
            'the step loop is a whole episode. In a loop the code bounds to fewer than 50 '
            'steps the finding carries a hint and is held back unless hints are shown: a few '
            'dozen prints cost milliseconds.'
        ),
        facts=('takes training steps',),
        tokens=('print', 'log', 'add_', 'wandb', 'mlflow'),
        triggers=(
            ('logger.info(...)',),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.per_step.per_step_logging:PerStepLogging',
    ),
    RuleInfo(
        code='GL303',
        name='per-step-checkpoint',
        default='on',
        fix='unsafe',
        message='a checkpoint is written on every training step; save every N steps',
        summary=(
            'A checkpoint written inside a training step loop, not under an interval guard: '
            '`torch.save(...)`, `model.save_pretrained(...)`, `accelerator.save_state(...)`, '
            '`trainer.save_checkpoint(...)`, Keras `model.save(...)` / `save_weights(...)`. '
            'In full-batch training (the step loop iterates epochs) a save runs once per '
            'epoch and is not reported. In a loop the code bounds to fewer than 50 steps the '
            'finding carries a hint and is held back unless hints are shown.'
        ),
        facts=('takes training steps',),
        tokens=('save',),
        triggers=(
            (
                'save',
                'save_checkpoint',
                'save_file',
                'save_model',
                'save_pretrained',
                'save_state',
                'save_weights',
            ),
            ('for ...: loss.backward()',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.per_step.per_step_checkpoint:PerStepCheckpoint',
    ),
    RuleInfo(
        code='GL401',
        name='no-mixed-precision',
        default='hint',
        fix=None,
        message=(
            'training runs in fp32 with no autocast/AMP: bf16 or fp16 mixed precision is '
            'typically 1.5-3x faster on tensor cores'
        ),
        summary=(
            'A module that trains a PyTorch model on an accelerator with its own loop (a '
            '`.backward()` in a step loop) and never uses mixed precision: no '
            '`torch.autocast`, no `GradScaler`, no bf16/fp16, no `--amp` flag. Reported once, '
            'at the first `.backward()` of the step loop. Modules whose precision is set '
            'elsewhere (Accelerate, Fabric, DeepSpeed, Lightning modules) are not reported.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('backward',),
        triggers=(
            ('.backward(',),
        ),
        implementation='gpulint.rules.precision.no_mixed_precision:NoMixedPrecision',
    ),
    RuleInfo(
        code='GL402',
        name='deprecated-amp-api',
        default='on',
        fix='safe',
        message='the `torch.cuda.amp` API is deprecated; use its `torch.amp` form with a device argument',
        summary=(
            '`torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)`, '
            '`torch.cuda.amp.custom_fwd` / `custom_bwd`, and their `torch.cpu.amp` twins, '
            'however imported (`from torch.cuda.amp import autocast as ac`, `import '
            'torch.cuda.amp as amp`).'
        ),
        facts=('imports torch',),
        tokens=('cuda.amp', 'cpu.amp', 'cuda import amp', 'cpu import amp'),
        triggers=(
            ('amp',),
        ),
        reported_in_tests=True,
        implementation='gpulint.rules.precision.deprecated_amp_api:DeprecatedAmpApi',
    ),
    RuleInfo(
        code='GL403',
        name='no-compile',
        default='hint',
        fix='unsafe',
        message='the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster',
        summary=(
            'A module that trains a PyTorch model on an accelerator with its own loop and '
            'never compiles it: no `torch.compile`, `model.compile()`, TorchScript, or '
            '`--compile` flag. Reported once, at the line that builds the model whose '
            'parameters the optimizer trains (or the optimizer, or the first `.backward()` '
            'when the model cannot be found). Scripts run by Accelerate or DeepSpeed are left '
            'out (their configuration can compile the model); Lightning and Fabric scripts '
            'are not (they leave `torch.compile` to the script).'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('backward',),
        triggers=(
            ('.backward(',),
        ),
        implementation='gpulint.rules.precision.no_compile:NoCompile',
    ),
    RuleInfo(
        code='GL404',
        name='fp32-matmul',
        default='hint',
        fix='unsafe',
        message=(
            'fp32 training without TF32: `torch.set_float32_matmul_precision("high")` makes '
            'matmuls up to 8x faster on Ampere+'
        ),
        summary=(
            'A module that trains a PyTorch model on an accelerator with its own loop, in '
            'fp32 (no mixed precision: see GL401), without enabling TF32 for matrix '
            'multiplications: no `torch.set_float32_matmul_precision("high")`, '
            '`torch.backends.cuda.matmul.allow_tf32 = True` or `fp32_precision = "tf32"`. '
            "Reported once, at the optimizer's construction (or the first `.backward()`). "
            'Under autocast most matmuls are already bf16/fp16, so it is not reported there.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('backward',),
        triggers=(
            ('.backward(',),
        ),
        implementation='gpulint.rules.precision.fp32_matmul:Fp32Matmul',
    ),
    RuleInfo(
        code='GL405',
        name='cudnn-benchmark',
        default='hint',
        fix='unsafe',
        message=(
            'convolutions on fixed-size inputs without `torch.backends.cudnn.benchmark = '
            'True`: cuDNN never searches for the fastest algorithm'
        ),
        summary=(
            'A module that trains a convolutional network (it builds `nn.Conv2d` layers or a '
            'torchvision CNN) on an accelerator with its own loop (it takes optimizer steps), '
            'on fixed-size inputs (MNIST, CIFAR, or a '
            '`RandomResizedCrop`/`CenterCrop`/`RandomCrop` transform), and never sets '
            "`torch.backends.cudnn.benchmark`. Reported once, at the optimizer's construction "
            '(or the first `.backward()`). A module that chooses deterministic kernels, or '
            'mentions `cudnn.benchmark` at all (a flag for it), has decided. Nor is a network '
            'too small for the algorithm to matter: where the module spells every size (a '
            'data set of one known image size, `nn.Conv2d` layers with literal channels and '
            'kernels, each built once for a step as the module shows it, literal batch '
            "sizes), an upper bound of its convolutions' work per step, forward and backward, "
            'of at most 50 M multiply-adds (a LeNet on 4 CIFAR images: 35 M) runs in under '
            "100 us even at 1 TFLOP/s -- less than the host spends dispatching the step's "
            'kernels, so the step waits on the host whatever algorithm runs.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('backward',),
        triggers=(
            ('.backward(',),
        ),
        implementation='gpulint.rules.precision.cudnn_benchmark:CudnnBenchmark',
    ),
    RuleInfo(
        code='GL406',
        name='cudnn-deterministic',
        default='hint',
        fix=None,
        message=(
            '`cudnn.deterministic = True` restricts convolutions to slower deterministic '
            'kernels on every run; fine where reproducibility is wanted, otherwise make it an '
            'option'
        ),
        summary=(
            '`torch.backends.cudnn.deterministic = True`, set unconditionally (not under an '
            '`if`, such as `if args.deterministic:` or `if args.seed is not None:`) in a '
            'module that trains on an accelerator.'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('deterministic',),
        triggers=(
            ('deterministic',),
        ),
        implementation='gpulint.rules.precision.cudnn_deterministic:CudnnDeterministic',
    ),
    RuleInfo(
        code='GL407',
        name='channels-last',
        default='hint',
        fix=None,
        message=(
            'a CNN trained in mixed precision in the default NCHW memory format: '
            '`channels_last` lets tensor-core convolutions skip layout transposes'
        ),
        summary=(
            'A module that trains a 2-D convolutional network (it builds `nn.Conv2d` layers '
            'or a torchvision CNN) on an accelerator with its own loop (it takes optimizer '
            'steps), in mixed precision (autocast, a GradScaler, bf16/fp16), and never uses '
            "the `channels_last` memory format. Reported once, at the optimizer's "
            'construction (or the first `.backward()`).'
        ),
        facts=('imports torch', 'runs on an accelerator', 'takes training steps'),
        tokens=('backward',),
        triggers=(
            ('.backward(',),
        ),
        implementation='gpulint.rules.precision.channels_last:ChannelsLast',
    ),
    RuleInfo(
        code='GL601',
        name='data-parallel',
        default='on',
        fix=None,
        message=(
            '`DataParallel` drives all GPUs from one process; use DistributedDataParallel '
            '(one process per GPU)'
        ),
        summary=(
            '`torch.nn.DataParallel(model)` (however imported) and the functional '
            '`torch.nn.parallel.data_parallel(...)`.'
        ),
        facts=('imports torch',),
        tokens=('DataParallel', 'data_parallel'),
        triggers=(
            ('DataParallel', 'data_parallel'),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.distributed.data_parallel:DataParallel',
    ),
    RuleInfo(
        code='GL602',
        name='gloo-on-cuda',
        default='on',
        fix='unsafe',
        message='the `gloo` backend moves CUDA gradients through host memory; use `nccl` for GPU training',
        summary=(
            '`torch.distributed.init_process_group("gloo")` (or `backend="gloo"`, directly or '
            'through a variable assigned `"gloo"`) in a module that trains on CUDA. Gloo '
            'chosen as a fallback is not reported: `"nccl" if torch.cuda.is_available() else '
            '"gloo"`, inside `if sys.platform == "win32":`, after `dist.is_nccl_available()`, '
            'or a mixed `"cpu:gloo,cuda:nccl"` string. Nor is a group that only serves RPC '
            '(`torch.distributed.rpc` in the module, and no DDP, FSDP or collective there): '
            'no gradient crosses it; nor a module that computes no gradient and wraps no '
            'model (no `.backward()`, no training step, no DDP or FSDP: an evaluation or '
            'sampling script whose group carries barriers, gathered results and a final '
            'metric).'
        ),
        facts=('imports torch', 'runs on an accelerator'),
        tokens=('gloo',),
        triggers=(
            ('init_process_group',),
        ),
        implementation='gpulint.rules.distributed.gloo_on_cuda:GlooOnCuda',
    ),
    RuleInfo(
        code='GL603',
        name='ddp-accumulation-sync',
        default='on',
        fix=None,
        message=(
            'gradient accumulation under DDP all-reduces gradients on every micro-batch; wrap '
            'the non-final ones in `model.no_sync()`'
        ),
        summary=(
            'Gradient accumulation in a module that trains with one process per GPU '
            '(DistributedDataParallel, FSDP, torch.distributed or Accelerate) -- '
            '`loss.backward()` on every micro-batch and `optimizer.step()` only under `if '
            '(step + 1) % accum_steps == 0:`, or after an inner loop over micro-batches, or a '
            'helper called with `update_grad=(i + 1) % accum == 0`, or a step function whose '
            'optimizer step is counted (`if self.since_update == self.grad_acc_steps:`) while '
            'the backward runs in another step function on every call -- without skipping the '
            'gradient all-reduce on the micro-batches in between: no `model.no_sync()`, no '
            '`accelerator.accumulate(model)`, no `require_backward_grad_sync` toggle, no apex '
            '`disable_allreduce()` anywhere in the module. Reported at the `.backward()` call '
            "(or the helper's call)."
        ),
        facts=('runs one process per GPU',),
        tokens=('backward', 'update_grad'),
        triggers=(
            ('.step(', 'optimizer_step=', 'step=', 'sync=', 'update=', 'update_grad='),
            ('.backward(', 'optimizer_step=', 'step=', 'sync=', 'update=', 'update_grad='),
            (
                'for ...: loss.backward()',
                'optimizer_step=',
                'step=',
                'sync=',
                'update=',
                'update_grad=',
            ),
        ),
        site_triggers=2,
        implementation='gpulint.rules.distributed.ddp_accumulation_sync:DdpAccumulationSync',
    ),
    RuleInfo(
        code='GL604',
        name='ddp-find-unused',
        default='on',
        fix=None,
        message=(
            '`find_unused_parameters=True` makes DDP traverse the autograd graph every step; '
            'drop it unless parameters are really unused'
        ),
        summary=(
            "`find_unused_parameters=True` given to `DistributedDataParallel`, Lightning's "
            "`DDPStrategy`, Accelerate's `DistributedDataParallelKwargs`, "
            '`ddp_find_unused_parameters=True` in Hugging Face `TrainingArguments`, and the '
            '`strategy="ddp_find_unused_parameters_true"` string.'
        ),
        tokens=('find_unused_parameters',),
        triggers=(
            ('ddp_find_unused_parameters', 'find_unused_parameters', 'strategy'),
        ),
        site_triggers=1,
        hint_by_default=True,
        implementation='gpulint.rules.distributed.ddp_find_unused:DdpFindUnused',
    ),
    RuleInfo(
        code='GL605',
        name='workers-per-rank',
        default='on',
        fix='unsafe',
        message=(
            '`num_workers` = every CPU core, in every rank: the ranks of a node oversubscribe '
            'its CPUs; divide by the ranks per node'
        ),
        summary=(
            '`DataLoader(num_workers=os.cpu_count())` -- or `multiprocessing.cpu_count()`, '
            '`len(os.sched_getaffinity(0))`, directly or through a variable -- in a module '
            'that runs one process per GPU (torch.distributed, DDP, Accelerate). A count '
            'divided by something (the ranks per node) or capped with `min(...)` is not '
            'reported.'
        ),
        facts=('imports torch', 'runs one process per GPU'),
        tokens=('cpu_count', 'sched_getaffinity'),
        triggers=(
            ('DataLoader(...)',),
            ('num_workers',),
        ),
        implementation='gpulint.rules.distributed.workers_per_rank:WorkersPerRank',
    ),
    RuleInfo(
        code='GL701',
        name='tfdata-serial-map',
        default='on',
        fix='safe',
        message='tf.data `.map()` or `.interleave()` without `num_parallel_calls` runs on one core',
        summary=(
            '`Dataset.map(...)` and `Dataset.interleave(...)` on a tf.data pipeline without '
            '`num_parallel_calls`, unless the pipeline is never consumed, only peeked at once '
            '(`for x in ds.take(1)`, `next(iter(ds))` to show a sample), only browsed by a '
            'loop that shows images (matplotlib, `cv2.imshow`) or prints its elements and '
            'trains nothing, or only used to adapt a Keras preprocessing layer once '
            '(`vectorizer.adapt(ds)`), and not in a module that writes TFRecord files and '
            'trains nothing (a one-off conversion of a dataset). A `map` cached right after '
            'is still reported: the whole first epoch waits for it, one element at a time '
            '(decoding audio, running an embedding model), and that is usually the epoch that '
            'costs most. TensorFlow 2.13 and later run a stateless `map` in parallel by '
            'themselves (`map_parallelization`, on by default): there a `map` is reported '
            'only when its function is not known to be stateless -- it draws random numbers '
            '(`tf.random.*`, a Keras augmentation layer), runs Python (`tf.py_function`), or '
            'is not a TensorFlow op, a lambda or a function of the module (a stateless Keras '
            'preprocessing layer, `Rescaling`, counts as an op) -- or when the project '
            'targets an older TensorFlow (its requirements, `target-tensorflow`) or turns '
            '`map_parallelization` off. A function whose name the module binds to two '
            'different things (a notebook with `resize = keras.Sequential([...])` in one cell '
            'and `def resize(...)` in another) is not guessed at: which one runs depends on '
            'the order the cells ran, so it is not reported on recent TensorFlow. A module '
            'whose pipeline options turn `map_parallelization` on '
            '(`options.experimental_optimization.map_parallelization = True`, then '
            '`ds.with_options(options)`) asked tf.data to parallelise its maps, on any '
            'TensorFlow version: there only a `map` whose function is known to be stateful '
            '(it calls `tf.random.*` or `tf.py_function` itself) is reported, since tf.data '
            'leaves that one serial.'
        ),
        facts=('imports tensorflow or keras',),
        tokens=('.map(', '.interleave('),
        hint_by_default=True,
        implementation='gpulint.rules.tensorflow.tfdata_serial_map:TfDataSerialMap',
    ),
    RuleInfo(
        code='GL702',
        name='tfdata-no-prefetch',
        default='on',
        fix='safe',
        message='tf.data pipeline consumed without `.prefetch(...)`: input and training steps take turns',
        summary=(
            'A tf.data pipeline consumed -- passed to `fit`/`evaluate`/`predict`, iterated by '
            'a training loop (a `for` that makes a training step), or handed to `iter(...)` '
            '-- when no definition of it has a `.prefetch(...)`. Loops that only look at '
            'outputs (`for out in ds.take(1)`, evaluation) and `next(iter(ds))` are not '
            'reported: there is no step to overlap with; nor is an iterator (`batches = '
            'iter(ds)`) read only by a loop that shows images (matplotlib, `cv2.imshow`) and '
            'trains nothing. Nor is a pipeline that only slices data in memory '
            '(`from_tensor_slices(...)` with `shuffle`/`batch`/`repeat` and no `map` or other '
            'per-element function): there is no input work to overlap.'
        ),
        facts=('imports tensorflow or keras',),
        tokens=('tf.data', 'tensorflow', 'tfds', 'dataset_from_directory'),
        triggers=(
            (
                '.evaluate(',
                '.fit(',
                '.predict(',
                'iter(',
                '.apply_gradients(',
                '.backward(',
                '.gradient(',
                '.manual_backward(',
                '.step(',
                '.train_on_batch(',
                'optimizer.apply(',
                'training_step',
            ),
            (
                'CsvDataset',
                'Dataset',
                'FixedLengthRecordDataset',
                'SqlDataset',
                'TFRecordDataset',
                'TextLineDataset',
                'audio_dataset_from_directory',
                'choose_from_datasets',
                'image_dataset_from_directory',
                'load',
                'make_batched_features_dataset',
                'make_csv_dataset',
                'sample_from_datasets',
                'text_dataset_from_directory',
                'timeseries_dataset_from_array',
            ),
        ),
        tokens_if_prefetch_injected=('inject_prefetch', 'autotune'),
        implementation='gpulint.rules.tensorflow.tfdata_no_prefetch:TfDataNoPrefetch',
    ),
    RuleInfo(
        code='GL703',
        name='tfdata-py-function',
        default='on',
        fix=None,
        message='Python code in a tf.data mapped function runs under the GIL, one element at a time',
        summary=(
            '`tf.py_function(...)` or `tf.numpy_function(...)` inside a function that a '
            'tf.data pipeline maps (`.map`, `.flat_map`, `.interleave`, `.filter`) -- a '
            'function or a lambda -- directly or through functions it calls, or a function of '
            'another module of the project that does (reported at its call in the mapped '
            'lambda or function: `ds.map(lambda x: load(x))`). A pipeline that is never '
            'consumed, or only peeked at once (`for x in ds.take(1):` to show a sample, and '
            'nothing trains on it), runs its Python a few times: not reported; nor is a '
            'module that writes TFRecord files and trains nothing (a one-off conversion of a '
            'dataset, where nothing waits for the pipeline).'
        ),
        facts=('imports tensorflow or keras',),
        tokens=('.map(', '.flat_map(', '.interleave(', '.filter('),
        hint_by_default=True,
        implementation='gpulint.rules.tensorflow.tfdata_py_function:TfDataPyFunction',
    ),
    RuleInfo(
        code='GL704',
        name='xla-disabled',
        default='on',
        fix='unsafe',
        message='XLA compilation is switched off (`jit_compile=False`): the step runs as many small kernels',
        summary=(
            'XLA switched off explicitly: `jit_compile=False` in `tf.function(...)` or '
            '`model.compile(...)`, and `tf.config.optimizer.set_jit(False)`.'
        ),
        facts=('imports tensorflow or keras',),
        tokens=('jit_compile', 'set_jit'),
        implementation='gpulint.rules.tensorflow.xla_disabled:XlaDisabled',
    ),
    RuleInfo(
        code='GL705',
        name='keras-steps-per-execution',
        default='hint',
        fix='unsafe',
        message='`model.compile()` without `steps_per_execution`: `fit` returns to Python after every batch',
        summary='Keras `model.compile(...)` without `steps_per_execution`.',
        facts=('imports tensorflow or keras',),
        tokens=('.compile(',),
        implementation='gpulint.rules.tensorflow.keras_steps_per_execution:KerasStepsPerExecution',
    ),
    RuleInfo(
        code='GL706',
        name='tf-host-sync-in-loop',
        default='on',
        fix='unsafe',
        message=(
            'a value read back to the host (`.numpy()`, `float()`) in the TensorFlow training '
            'loop makes the host wait for the GPU every step'
        ),
        summary=(
            "`.numpy()`, `float(loss)` (of a step's loss, metric or output), `int(...)` or "
            '`float(...)` of what a compiled step returns, and a TensorFlow predicate used as '
            'a Python condition (`if tf.equal(optimizer.iterations % n, 0):`, `if '
            'tf.reduce_any(tf.math.is_nan(loss)):` -- the condition reads the tensor back to '
            'decide), inside a TensorFlow training step loop -- one that calls '
            '`tape.gradient`, `apply_gradients` or `train_on_batch`, directly or through a '
            'step function -- not under an interval guard, in a loop that does not time its '
            'steps (a benchmark loop needs the read for its clock to measure the step), and '
            'not in a loop the code bounds to fewer than 20 steps (`range(10)`, a tf.data '
            "pipeline's `take(10)`: a demo, where the reads cost milliseconds next to seconds "
            'of start-up).'
        ),
        facts=('imports tensorflow or keras', 'takes training steps'),
        tokens=('.numpy(', 'float(', 'int(', 'equal(', 'greater', 'less', 'logical_', 'reduce_a', 'is_'),
        triggers=(
            ('for ...: loss.backward()',),
        ),
        hint_by_default=True,
        implementation='gpulint.rules.tensorflow.tf_host_sync_in_loop:TfHostSyncInLoop',
    ),
    RuleInfo(
        code='GL707',
        name='tf-eager-step',
        default='on',
        fix='unsafe',
        message='GradientTape training step runs eagerly (not in `tf.function`): Python dispatches every op',
        summary=(
            'A `tf.GradientTape` training step that runs eagerly: a function that calls '
            '`tape.gradient(...)` and `optimizer.apply_gradients(...)` without being '
            'decorated with `tf.function` (or traced by one: called from a compiled function, '
            'wrapped by `tf.function(step)`, or a Keras `train_step` override, which `fit` '
            'compiles), and a tape step written inline in a Python training loop (also when a '
            'helper of the module runs the tape and the loop applies the gradients).'
        ),
        facts=('imports tensorflow or keras', 'takes training steps'),
        tokens=('.gradient(',),
        hint_by_default=True,
        implementation='gpulint.rules.tensorflow.tf_eager_step:TfEagerStep',
    ),
    RuleInfo(
        code='GL708',
        name='keras-python-input',
        default='hint',
        fix=None,
        message=(
            'Keras `fit` fed from Python (a generator or a `Sequence`): batches are produced '
            'one at a time under the GIL'
        ),
        summary=(
            'Keras `fit(...)` fed by a Python generator (a generator function of this module, '
            'a generator expression) or by `dataset.as_numpy_iterator()` / '
            '`tfds.as_numpy(...)`.'
        ),
        facts=('imports tensorflow or keras',),
        tokens=('yield', 'as_numpy_iterator', 'as_numpy('),
        implementation='gpulint.rules.tensorflow.keras_python_input:KerasPythonInput',
    ),
    RuleInfo(
        code='GL801',
        name='hf-trainer-args',
        default='on',
        fix='unsafe',
        message=(
            'TrainingArguments that starve the GPU: no loader workers, or logging, evaluation '
            'or saving every few steps'
        ),
        summary=(
            'Hugging Face `TrainingArguments(...)` (and `Seq2SeqTrainingArguments`) written '
            'with literal values that starve the GPU: `dataloader_num_workers` absent or `0`: '
            'batches are loaded and collated in the training process; `logging_steps=1`: the '
            'Trainer reads the loss back from the GPU and logs on every step; `eval_steps` of '
            '10 or less with `eval_strategy="steps"` (or `logging_steps=1` standing in for an '
            'absent `eval_steps`): a pass over the evaluation set every few steps; '
            '`save_steps` of 10 or less with the default `save_strategy="steps"`: a '
            'checkpoint every few steps.'
        ),
        tokens=('TrainingArguments',),
        triggers=(
            ('Seq2SeqTrainingArguments', 'TrainingArguments'),
        ),
        implementation='gpulint.rules.trainers.hf_trainer_args:HfTrainerArgs',
    ),
    RuleInfo(
        code='GL802',
        name='lightning-trainer',
        default='on',
        fix='unsafe',
        message=(
            'Lightning Trainer that logs or validates every few steps: per-step work keeps '
            'the GPU waiting'
        ),
        summary=(
            'Lightning `Trainer(...)` with `log_every_n_steps=1`, or an integer '
            '`val_check_interval` of 10 or less (validation every few training batches).'
        ),
        tokens=('log_every_n_steps', 'val_check_interval'),
        triggers=(
            ('log_every_n_steps=', 'val_check_interval='),
            ('Trainer',),
        ),
        site_triggers=1,
        implementation='gpulint.rules.trainers.lightning_trainer:LightningTrainerArgs',
    ),
    RuleInfo(
        code='GL803',
        name='trainer-precision',
        default='hint',
        fix='unsafe',
        message=(
            'trainer configured for fp32: mixed precision (bf16) is usually about 2x faster '
            'on tensor-core GPUs'
        ),
        summary=(
            'A trainer configured for full fp32 training: `TrainingArguments(...)` with '
            'neither `bf16=True` nor `fp16=True`, and Lightning `Trainer(...)` without '
            '`precision=` (or with `32`/`"32-true"`). CPU-only trainers (`use_cpu=True`, '
            '`accelerator="cpu"`) are not reported.'
        ),
        tokens=('Trainer',),
        triggers=(
            ('Seq2SeqTrainingArguments', 'Trainer', 'TrainingArguments'),
        ),
        implementation='gpulint.rules.trainers.trainer_precision:TrainerPrecision',
    ),
    RuleInfo(
        code='GL900',
        name='unused-suppression',
        default='hint',
        fix=None,
        message='Suppression comment suppresses nothing',
        summary=(
            'A `# gpulint: ignore[GL...]` or `# noqa: GL...` comment whose gpulint codes '
            'suppress no finding on its line: the code was fixed, moved, or the comment names '
            "the wrong rule. Only gpulint's own codes (GL...) are reported, and only those of "
            'rules enabled for the file: a `# noqa: E501` belongs to another tool, and a code '
            'left out by `--select` may still be needed by a full run. A bare `# gpulint: '
            'ignore` that suppresses nothing is reported too; a bare `# noqa` is not (other '
            'tools read it).'
        ),
        reported_in_tests=True,
        implementation='gpulint.rules.meta.unused_suppression:UnusedSuppression',
    ),
)

OPTIONS: dict[str, RuleOption] = {
    'num-workers': RuleOption(
        'num-workers',
        default='min(8, os.cpu_count() or 1)',
        help=(
            'Python expression the GL101 and GL801 fixes write as the number of loader worker '
            'processes.'
        ),
        type=str,
        check=worker_expression,
    ),
    'log-every': RuleOption(
        'log-every',
        default=100,
        help=(
            'Interval (in steps) the GL302, GL201 and GL706 fixes guard logging with (at '
            'most: a loop of known length logs ten times a pass).'
        ),
        type=int,
        check=positive_int,
    ),
    'eval-every': RuleOption(
        'eval-every',
        default=1000,
        help=(
            'Interval (in steps) the GL301 fix guards validation with (at most: a loop of '
            'known length validates ten times a pass).'
        ),
        type=int,
        check=positive_int,
    ),
    'checkpoint-every': RuleOption(
        'checkpoint-every',
        default=1000,
        help=(
            'Interval (in steps) the GL303 fix guards checkpoints with (at most: a loop of '
            'known length saves ten times a pass).'
        ),
        type=int,
        check=positive_int,
    ),
    'steps-per-execution': RuleOption(
        'steps-per-execution',
        default=32,
        help="Value GL705's fix writes as `steps_per_execution=`.",
        type=int,
        check=positive_int,
    ),
}

# The tokens of the facts rules require (analysis/facts.py): one occurs where the fact holds.
FACT_TOKENS: dict[str, tuple[bytes, ...]] = {
    'imports tensorflow or keras': (
        b'tensorflow',
        b'keras',
    ),
    'imports torch': (
        b'torch',
    ),
    'runs on an accelerator': (
        b'cuda',
        b'gpu',
        b'accelerat',
        b'fabric',
        b'deepspeed',
        b'dev',
        b'rank',
        b'nccl',
        b'LightningModule',
    ),
    'runs one process per GPU': (
        b'distributed',
        b'Distributed',
        b'accelerate',
    ),
    'takes training steps': (
        b'backward',
        b'.step(',
        b'gradient(',
        b'apply_gradients',
        b'train_on_batch',
        b'training_step',
        b'.apply(',
    ),
}

# The same in code (analysis/code_shapes.py): what the trigger filter checks.
FACT_SHAPES: dict[str, tuple[str, ...]] = {
    'imports tensorflow or keras': ('tensorflow', 'keras'),
    'imports torch': ('torch',),
    'takes training steps': (
        '.apply_gradients(',
        '.backward(',
        '.gradient(',
        '.manual_backward(',
        '.step(',
        '.train_on_batch(',
        'optimizer.apply(',
        'training_step',
    ),
}

# Facts the rest of the project can make true: the property of the project view that says so.
FACT_ELSEWHERE: dict[str, str] = {
    'imports torch': 'torch_loop_elsewhere',
    'runs on an accelerator': 'accelerator_loop_elsewhere',
    'takes training steps': 'steps_elsewhere',
}

# Where a module calls another module's functions, the shapes of its code on which what they
# return can make the fact hold; a fact not listed may hold on any code then.
FACT_THROUGH_CALLS: dict[str, tuple[str, ...]] = {
    'takes training steps': ('.apply(',),
}
