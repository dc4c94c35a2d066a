"""Where a value comes from: a small, flow-insensitive origin analysis.

Rules need to know what kind of object an expression is: is `ds` a tf.data pipeline (so `.map` is
tf.data's), is `opt` an optimizer (so `.step()` is a training step, not `scheduler.step()` or an RL
`env.step()`)?  This module answers with *kinds*: it follows names (and `self.attr`) to every value
assigned to them anywhere in the module, through method chains that keep the kind (`ds.map(f)
.batch(32)` is still a dataset), to the constructor call, and matches the constructor's qualified
name.  Anything it cannot follow is "unknown", which rules treat as "not a match".
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from gpulint.linter.analysis.imports import ImportTable


@dataclass(frozen=True)
class Kind:
    name: str
    # Qualified names of constructors; an entry ending in "." matches everything under it.
    constructors: tuple[str, ...]
    # Methods whose result has the same kind as their receiver (builder/fluent APIs).
    chain_methods: frozenset[str] = frozenset()
    # Constructors under a prefix that are *not* of this kind.
    excluded: tuple[str, ...] = ()

    def matches(self, qualified: str) -> bool:
        if any(qualified == e or (e.endswith(".") and qualified.startswith(e)) for e in self.excluded):
            return False
        return any(
            qualified == c or (c.endswith(".") and qualified.startswith(c)) for c in self.constructors
        )


TFDATA_CHAIN = frozenset(
    "apply batch bucket_by_sequence_length cache concatenate enumerate filter flat_map "
    "group_by_window ignore_errors interleave map padded_batch prefetch ragged_batch rebatch "
    "rejection_resample repeat sample_from_datasets scan shard shuffle skip snapshot "
    "sparse_batch take take_while unbatch unique window with_options zip".split()
)

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "tfdata",
            constructors=(
                "tensorflow.data.Dataset.",
                "tensorflow.data.TFRecordDataset",
                "tensorflow.data.TextLineDataset",
                "tensorflow.data.FixedLengthRecordDataset",
                "tensorflow.data.experimental.make_csv_dataset",
                "tensorflow.data.experimental.make_batched_features_dataset",
                "keras.utils.image_dataset_from_directory",
                "keras.utils.text_dataset_from_directory",
                "keras.utils.audio_dataset_from_directory",
                "keras.utils.timeseries_dataset_from_array",
                "keras.preprocessing.image_dataset_from_directory",
                "keras.preprocessing.text_dataset_from_directory",
                "tensorflow_datasets.load",
            ),
            chain_methods=TFDATA_CHAIN,
        ),
        Kind("dataloader", constructors=("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")),
        Kind(
            "tensordataset",
            constructors=("torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"),
        ),
        Kind(
            "scheduler",
            constructors=("torch.optim.lr_scheduler.", "transformers.get_scheduler", "transformers.get_linear_schedule_with_warmup", "transformers.get_cosine_schedule_with_warmup"),
        ),
        Kind(
            "optimizer",
            constructors=("torch.optim.", "keras.optimizers.", "tensorflow.optimizers.", "transformers.AdamW", "transformers.Adafactor", "bitsandbytes.optim.", "apex.optimizers."),
            excluded=("torch.optim.lr_scheduler.", "keras.optimizers.schedules."),
        ),
        Kind("gradscaler", constructors=("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cpu.amp.GradScaler")),
        Kind("tape", constructors=("tensorflow.GradientTape",)),
        Kind("summarywriter", constructors=("torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter", "torch.utils.tensorboard.writer.SummaryWriter")),
        Kind("wandbrun", constructors=("wandb.init",)),
        Kind("logger", constructors=("logging.getLogger", "logging.Logger", "accelerate.logging.get_logger", "transformers.utils.logging.get_logger")),
    )
}


def target_key(node: cst.BaseExpression) -> str | None:
    """The key an assignment target is stored under: `x`, or `self.x` for attributes of self."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
        return f"self.{node.attr.value}"
    return None


class ValueOrigins:
    """Every value assigned to each name in the module, and the kind queries built on them."""

    def __init__(self, imports: ImportTable) -> None:
        self.imports = imports
        self.assigned: dict[str, list[cst.BaseExpression]] = {}
        self._memo: dict[tuple[int, str], bool] = {}

    # -- building ---------------------------------------------------------------------------
    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        key = target_key(target)
        if key is not None:
            self.assigned.setdefault(key, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bind(t.value, v.value)

    def add(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._bind(node.target, node.value)
            self._bind(node.target, node.annotation.annotation)
        elif isinstance(node, cst.WithItem):
            if node.asname is not None:
                self._bind(node.asname.name, node.item)
        elif isinstance(node, cst.Param):
            if node.annotation is not None:
                self._bind(node.name, node.annotation.annotation)

    # -- queries ----------------------------------------------------------------------------
    def is_kind(self, expr: cst.BaseExpression, kind: str) -> bool:
        return self._is_kind(expr, KINDS[kind], set())

    def _is_kind(self, expr: cst.BaseExpression, kind: Kind, seen: set[str]) -> bool:
        memo_key = (id(expr), kind.name)
        if not seen and memo_key in self._memo:
            return self._memo[memo_key]
        result = self._compute(expr, kind, seen)
        if not seen:
            self._memo[memo_key] = result
        return result

    def _compute(self, expr: cst.BaseExpression, kind: Kind, seen: set[str]) -> bool:
        if isinstance(expr, cst.Call):
            qualified = self.imports.qualified_name(expr.func)
            if qualified is not None:
                return kind.matches(qualified)
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in kind.chain_methods:
                return self._is_kind(func.value, kind, seen)
            return False
        if isinstance(expr, cst.Subscript):
            # An annotation such as `Optional[tf.data.Dataset]` names the kind inside.
            return any(
                isinstance(el.slice, cst.Index) and self._is_kind(el.slice.value, kind, seen)
                for el in expr.slice
            )
        qualified = self.imports.qualified_name(expr)
        if qualified is not None and kind.matches(qualified):
            return True  # an annotation naming the class itself
        key = target_key(expr)
        if key is None or key in seen:
            return False
        seen.add(key)
        try:
            return any(self._is_kind(value, kind, seen) for value in self.assigned.get(key, ()))
        finally:
            seen.discard(key)
