"""Facts about a whole file that rules require (`Rule.requires`).

A fact is checked twice, from one declaration.  Before parsing, on the file's bytes: `may_hold` is a
cheap necessary condition (the file spells one of the fact's tokens), so a file where a rule's
facts cannot hold is never parsed for it.  After parsing, on the FileContext: `holds` is the real
check, and the engine runs a rule only on files where every fact it requires holds -- rules do not
test these conditions again.

A fact's tokens must occur in every file where the fact holds, or the prefilter would hide
findings; tests/test_facts.py checks that on real code.  A fact that the rest of the project can
make true (a module whose helper another module calls on every step takes steps without spelling
`backward`) also says so from the module's project view (analysis/project.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from gpulint.linter.analysis.loops import STEP_TOKENS
from gpulint.linter.analysis.project import EMPTY_VIEW, ModuleView

if TYPE_CHECKING:
    from gpulint.linter.analysis.context import FileContext

# Text every module that names an accelerator contains (one of), by how
# `FileContext.names_accelerator` decides.
ACCELERATOR_TOKENS = (b"cuda", b"gpu", b"accelerat", b"fabric", b"deepspeed")


class Fact:
    """A condition on a whole file: `holds` on the parsed module, `may_hold` on its bytes (and on
    what the project index says about it, for facts other modules can make true)."""

    def __init__(
        self,
        name: str,
        check: Callable[[FileContext], bool],
        tokens: tuple[bytes, ...] = (),
        elsewhere: Callable[[ModuleView], bool] | None = None,
    ) -> None:
        self.name = name
        self._check = check
        # One of these occurs in every file where the fact holds, unless `elsewhere` says the
        # project makes it hold; () when no text is required.
        self.tokens = tokens
        self._elsewhere = elsewhere

    def holds(self, ctx: FileContext) -> bool:
        return self._check(ctx)

    def may_hold(self, source: bytes, view: ModuleView = EMPTY_VIEW) -> bool:
        if self._elsewhere is not None and self._elsewhere(view):
            return True
        return not self.tokens or any(token in source for token in self.tokens)

    def __invert__(self) -> Fact:
        # No text rules a negation out: a file may lack a fact whatever it spells.
        return Fact(f"not ({self.name})", lambda ctx: not self.holds(ctx))

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

    def may_hold(self, source: bytes, view: ModuleView = EMPTY_VIEW) -> bool:
        return all(part.may_hold(source, view) for part in self.parts)


class _Either(Fact):
    def __init__(self, first: Fact, second: Fact) -> None:
        super().__init__(f"{first.name} or {second.name}", lambda ctx: first.holds(ctx) or second.holds(ctx))
        self.parts = (first, second)
        self.tokens = first.tokens + second.tokens if first.tokens and second.tokens else ()

    def may_hold(self, source: bytes, view: ModuleView = EMPTY_VIEW) -> bool:
        return any(part.may_hold(source, view) for part in self.parts)


TORCH = Fact("imports torch", lambda ctx: ctx.uses_torch, (b"torch",))
TENSORFLOW = Fact("imports tensorflow or keras", lambda ctx: ctx.uses_tensorflow, (b"tensorflow", b"keras"))
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
ACCELERATOR = NAMES_ACCELERATOR | PLACES_ON_DEVICE | LIGHTNING_MODULE
STEPS = Fact(
    "takes training steps",
    lambda ctx: ctx.takes_steps,
    STEP_TOKENS,
    # Another module runs one of its functions per step, or it calls a step function of another.
    elsewhere=lambda view: bool(view.per_step) or any(facts.steps for _, facts in view.calls),
)
ONE_PROCESS_PER_GPU = Fact(
    "runs one process per GPU",
    lambda ctx: ctx.torch.one_process_per_gpu,
    # torch.distributed (and its `DistributedDataParallel`, `DistributedSampler`) or Accelerate.
    (b"distributed", b"Distributed", b"accelerate"),
)
