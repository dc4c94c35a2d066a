"""Facts about a whole file that rules require (`Rule.requires`).

A fact is checked twice, from one declaration.  Before parsing, on the file's bytes: `may_hold` is a
cheap necessary condition (the file spells one of the fact's tokens), so a file where a rule's
facts cannot hold is never parsed for it.  After parsing, on the FileContext: `holds` is the real
check, and the engine runs a rule only on files where every fact it requires holds -- rules do not
test these conditions again.

A fact's tokens must occur in every file where the fact holds, or the prefilter would hide
findings; tests/test_facts.py checks that on real code.  The prefilter reads them, by the fact's
name, from the generated catalog (gpulint/linter/catalog.py), so rejecting a file imports neither
libcst nor this module.  A fact that the rest of the project can make true (a module whose helper
another module calls on every step takes steps without spelling `backward`) names the property of
the module's project view (analysis/project.py) that says so: `elsewhere`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gpulint.linter.analysis.loops import STEP_SHAPES, STEP_TOKENS

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext
    from gpulint.linter.analysis.project import ModuleView

# Text every module that names an accelerator contains (one of), by how
# `FileContext.names_accelerator` decides.
ACCELERATOR_TOKENS = (b"cuda", b"gpu", b"accelerat", b"fabric", b"deepspeed")


class Fact:
    """A condition on a whole file: `holds` on the parsed module, `may_hold` on its bytes (or on
    its project view, for a fact the rest of the project can make true)."""

    def __init__(
        self,
        name: str,
        check: Callable[[FileContext], bool],
        tokens: tuple[bytes, ...] = (),
        elsewhere: str | None = None,
        shapes: tuple[str, ...] = (),
        through_calls: tuple[str, ...] | None = None,
    ) -> None:
        self.name = name
        self._check = check
        # One of these occurs in every file where the fact holds, unless the project view's
        # property named `elsewhere` is true; () when no text is required.
        self.tokens = tokens
        self.elsewhere = elsewhere
        # The same, in the module's code (analysis/code_shapes.py: what the trigger filter
        # checks, for a module the rest of the project says nothing about); () when not known.
        # Only a fact with tokens has shapes (the catalog keys both by the fact's name).
        self.shapes = shapes if tokens else ()
        # In a module that calls another module's functions, the shapes of its own code on which
        # what they return can make the fact hold (an optimizer another module builds, whose
        # `.apply(grads)` here takes a step); None: any code may (project.py `may_make_hold`).
        self.through_calls = through_calls

    def holds(self, ctx: FileContext) -> bool:
        return self._check(ctx)

    def may_hold(self, source: bytes, view: ModuleView | None = None) -> bool:
        if self.elsewhere is not None and view is not None and getattr(view, self.elsewhere):
            return True
        return not self.tokens or any(token in source for token in self.tokens)

    def spelled(self) -> tuple[Fact, ...]:
        """The facts with tokens that hold wherever this one does: what the prefilter checks (by
        name, in the generated catalog)."""
        return (self,) if self.tokens else ()

    def __invert__(self) -> Fact:
        # No text rules a negation out: a file may lack a fact whatever it spells.
        return Fact(f"not ({self.name})", lambda ctx: not self.holds(ctx))

    def named(self, name: str) -> Fact:
        """The fact under a name of its own (a combination's is long; the catalog keys facts by it)."""
        self.name = name
        return self

    def __and__(self, other: Fact) -> Fact:
        return _Both(self, other)

    def __or__(self, other: Fact) -> Fact:
        return _Either(self, other)

    def __repr__(self) -> str:
        return f"Fact({self.name!r})"


class _Both(Fact):
    def __init__(self, first: Fact, second: Fact) -> None:
        super().__init__(f"{first.name} and {second.name}", lambda ctx: first.holds(ctx) and second.holds(ctx))
        self.parts = (first, second)

    def may_hold(self, source: bytes, view: ModuleView | None = None) -> bool:
        return all(part.may_hold(source, view) for part in self.parts)

    def spelled(self) -> tuple[Fact, ...]:
        return self.parts[0].spelled() + self.parts[1].spelled()


class _Either(Fact):
    """One fact or the other: spelled by the tokens of both (when each has some)."""

    def __init__(self, first: Fact, second: Fact) -> None:
        tokens = first.tokens + second.tokens if first.tokens and second.tokens else ()
        super().__init__(f"{first.name} or {second.name}", lambda ctx: first.holds(ctx) or second.holds(ctx), tokens)
        self.parts = (first, second)

    def may_hold(self, source: bytes, view: ModuleView | None = None) -> bool:
        return any(part.may_hold(source, view) for part in self.parts)


TORCH = Fact(
    "imports torch",
    lambda ctx: ctx.uses_torch or ctx.project.torch_loop_elsewhere,
    (b"torch",),
    # a helper that a torch module's training loop runs per step works on its tensors
    elsewhere="torch_loop_elsewhere",
    shapes=("torch",),  # (an import of torch names it)
)
TENSORFLOW = Fact(
    "imports tensorflow or keras",
    lambda ctx: ctx.uses_tensorflow,
    (b"tensorflow", b"keras"),
    shapes=("tensorflow", "keras"),
)
# Evidence that a module runs on an accelerator, of three kinds (rules that only need the host --
# loader workers, tf.data parallelism, per-step logging -- require none).
NAMES_ACCELERATOR = Fact("names CUDA or an accelerator library", lambda ctx: ctx.names_accelerator, ACCELERATOR_TOKENS)
PLACES_ON_DEVICE = Fact(
    "moves work to a device it is given",
    lambda ctx: ctx.places_on_device,
    # `.to(device)`, `.to(self.dev)`, `.to(local_rank)`, `device_ids=[rank]`, an "nccl" process group.
    (b"dev", b"rank", b"nccl"),
)
LIGHTNING_MODULE = Fact("defines a LightningModule", lambda ctx: ctx.defines_lightning_module, (b"LightningModule",))
_ACCELERATOR_HERE = NAMES_ACCELERATOR | PLACES_ON_DEVICE | LIGHTNING_MODULE
ACCELERATOR = Fact(
    "runs on an accelerator",
    lambda ctx: _ACCELERATOR_HERE.holds(ctx) or ctx.project.accelerator_loop_elsewhere,
    _ACCELERATOR_HERE.tokens,
    # or a training loop that names an accelerator runs one of its functions per step
    elsewhere="accelerator_loop_elsewhere",
)
STEPS = Fact(
    "takes training steps",
    lambda ctx: ctx.takes_steps,
    STEP_TOKENS,
    # another module runs one of its functions per step, or it calls a step function of another
    elsewhere="steps_elsewhere",
    shapes=STEP_SHAPES,
    # Every other step method is one of the shapes: only `.apply(` needs its receiver's kind, which
    # a value another module returns can give (loops.is_direct_step_call).
    through_calls=(".apply(",),
)
ONE_PROCESS_PER_GPU = Fact(
    "runs one process per GPU",
    lambda ctx: ctx.torch.one_process_per_gpu,
    # torch.distributed (and its `DistributedDataParallel`, `DistributedSampler`) or Accelerate.
    (b"distributed", b"Distributed", b"accelerate"),
)
