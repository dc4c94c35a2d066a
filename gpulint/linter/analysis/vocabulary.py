"""What gpulint recognises by name, as plain data and string tests (no libcst): the import paths
that are one API, the kinds of values and their constructors, the methods that take a training
step, the clocks a step timer reads, the calls that end a program or count the CPUs.  The parsed-tree analyses
(imports, values, loops) and the project index (project.py, which must not import libcst) share
them from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Modules that are the same API under another import path.  Resolution canonicalises to the right
# side so rules can match one spelling: `import keras` and `tf.keras` are both Keras, and Lightning's
# two package names are one framework.
CANONICAL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("tensorflow.keras", "keras"),
    ("tf_keras", "keras"),
    ("pytorch_lightning", "lightning.pytorch"),
    ("lightning_fabric", "lightning.fabric"),
)


def canonical(qualified: str) -> str:
    for prefix, replacement in CANONICAL_PREFIXES:
        if qualified == prefix or qualified.startswith(prefix + "."):
            return replacement + qualified[len(prefix) :]
    return qualified


@dataclass(frozen=True)
class Kind:
    name: str
    # Qualified names of constructors; an entry ending in "." matches everything under it.
    constructors: tuple[str, ...]
    # Methods whose result has the same kind as their receiver (builder/fluent APIs).
    chain_methods: frozenset[str] = frozenset()
    # Constructors under a prefix that are *not* of this kind.
    excluded: tuple[str, ...] = ()
    # Constructors whose result holds values of this kind (`tfds.load(...)["train"]`, `a, b = ...`).
    containers: tuple[str, ...] = ()

    def matches(self, qualified: str) -> bool:
        if any(qualified == e or (e.endswith(".") and qualified.startswith(e)) for e in self.excluded):
            return False
        return any(qualified == c or (c.endswith(".") and qualified.startswith(c)) for c in self.constructors)


# `torch.<name>(...)` factories: without `device=` they build the tensor on the host (GL203).
TENSOR_FACTORIES = frozenset(
    "zeros ones empty full arange linspace logspace eye tensor as_tensor zeros_like ones_like empty_like "
    "full_like rand randn randint randperm rand_like randn_like randint_like normal bernoulli "
    "tril_indices triu_indices".split()
)
# Factories that copy their data from the host whatever the device: `device=` still builds on the
# host and copies.
FROM_DATA_FACTORIES = frozenset({"tensor", "as_tensor"})
# `_like` factories take the device of their input, which may already be on the GPU.
LIKE_FACTORIES = frozenset(f for f in TENSOR_FACTORIES if f.endswith("_like"))
# Legacy typed constructors always build on the host (`torch.LongTensor(x)`).
LEGACY_TENSOR_CONSTRUCTORS = frozenset(
    f"{kind}Tensor" for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
)
# The calls that build a tensor on the host which a `device=` would build on the device instead.
HOST_BUILDERS = (TENSOR_FACTORIES - LIKE_FACTORIES - FROM_DATA_FACTORIES) | LEGACY_TENSOR_CONSTRUCTORS
# Methods that leave a host tensor on the host (between a factory and its copy).
HOST_TENSOR_METHODS = frozenset(
    "contiguous float double half long int short bool bfloat16 view reshape unsqueeze squeeze flatten t permute "
    "transpose flip repeat expand clone detach".split()
)
# Methods that copy a tensor to a device (GL203 reports them on a host tensor).
DEVICE_COPY_METHODS = frozenset({"to", "cuda", "type_as"})

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
                "tensorflow.data.experimental.CsvDataset",
                "tensorflow.data.experimental.SqlDataset",
                "tensorflow.data.experimental.sample_from_datasets",
                "tensorflow.data.experimental.choose_from_datasets",
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
            containers=(
                "tensorflow_datasets.load",
                "keras.utils.image_dataset_from_directory",
                "keras.utils.text_dataset_from_directory",
                "keras.utils.audio_dataset_from_directory",
                "keras.utils.split_dataset",
            ),
        ),
        Kind("dataloader", constructors=("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")),
        Kind(
            "tensordataset",
            constructors=("torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"),
        ),
        Kind(
            "scheduler",
            constructors=(
                "torch.optim.lr_scheduler.",
                "transformers.get_scheduler",
                "transformers.get_linear_schedule_with_warmup",
                "transformers.get_cosine_schedule_with_warmup",
            ),
        ),
        Kind(
            "optimizer",
            constructors=(
                "torch.optim.",
                "keras.optimizers.",
                "tensorflow.optimizers.",
                "transformers.AdamW",
                "transformers.Adafactor",
                "bitsandbytes.optim.",
                "apex.optimizers.",
            ),
            excluded=("torch.optim.lr_scheduler.", "keras.optimizers.schedules."),
        ),
        Kind(
            "gradscaler", constructors=("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cpu.amp.GradScaler")
        ),
        Kind("tape", constructors=("tensorflow.GradientTape",)),
        Kind(
            "summarywriter",
            constructors=(
                "torch.utils.tensorboard.SummaryWriter",
                "tensorboardX.SummaryWriter",
                "torch.utils.tensorboard.writer.SummaryWriter",
            ),
        ),
        Kind("wandbrun", constructors=("wandb.init",)),
        Kind(
            "logger",
            constructors=(
                "logging.getLogger",
                "logging.Logger",
                "accelerate.logging.get_logger",
                "transformers.utils.logging.get_logger",
            ),
        ),
    )
}


_OPTIMIZER_NAME = re.compile(r"optim|(^|_)opt($|_|\d|s\b)|(^|_)(adam|sgd)", re.IGNORECASE)

# Clocks a step timer reads.
# Libraries that place work on accelerators, and calls that name one: a module that imports or makes
# them names an accelerator (FileContext.names_accelerator; the project index's summaries too).
ACCELERATOR_MODULES = ("accelerate", "lightning.fabric", "deepspeed")
ACCELERATOR_CALL_PREFIXES = (
    "torch.cuda.",
    "torch.accelerator.",
    "torch.backends.cuda.",
    "torch.backends.cudnn.",
    "lightning.Fabric",
    "lightning.fabric.Fabric",
)
# Receivers and methods whose name says they time something (`perf_meter.update(n)`,
# `timer.lap()`, `stopwatch.stop()`): a call of one right after a synchronize is a step timer reading
# the time the synchronize waited for, when the project index cannot see the timer's code.
TIMER_NAME = re.compile(r"tim(er|ing)|perf|stopwatch|(^|_)(lap|toc|tick|elapsed)($|_)|throughput", re.IGNORECASE)
CLOCKS = re.compile(r"^(time\.(time|perf_counter|monotonic|process_time)(_ns)?|timeit\.default_timer)$")
EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit", "os.abort"})

# Calls that count the machine's CPUs: each returns a positive count, or None when it cannot tell
# (`os.cpu_count() or 1` is positive).  `len(os.sched_getaffinity(0))` counts the usable ones.
CPU_COUNT_CALLS = frozenset(
    {"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count", "torch.multiprocessing.cpu_count"}
)
CPU_AFFINITY_CALL = "os.sched_getaffinity"


# A step loop known to run fewer steps than this in all is a demo or a smoke test (loops.py).
SHORT_LOOP_STEPS = 20
# A step loop known to run fewer steps than this in all (and at least SHORT_LOOP_STEPS) is reported
# by the per-step rules with a hint: a few dozen syncs or prints cost milliseconds in a run whose
# start-up takes seconds, so the finding shows no evidence of a real cost (loops.py).
FEW_LOOP_STEPS = 50
# Wrappers that iterate what they are given, as many times: `enumerate(xs)`, `tqdm(range(n))`.
PASS_THROUGH_ITERATORS = frozenset({"enumerate", "tqdm", "reversed", "sorted", "list", "tuple"})
RANGES = frozenset({"range", "trange"})

# Methods a framework calls once per batch or sample.
PER_CALL_METHODS = frozenset(
    {"forward", "__call__", "call", "training_step", "validation_step", "test_step", "predict_step", "__getitem__"}
)

# The methods a step call is made with (`is_step_method`, loops.is_direct_step_call): a call of
# any other name takes a step only as a call of a step function, which makes one of these.
STEP_METHODS = frozenset(
    {"backward", "manual_backward", "apply_gradients", "train_on_batch", "step", "gradient", "apply"}
)


def is_step_method(method: str, receiver: str | None) -> bool:
    """`receiver.method(...)` takes a training step, by the names alone (what the module's value
    origins cannot tell): `loss.backward()`, `optimizer.step()`, `scaler.step(opt)`,
    `tape.gradient(...)`, `opt.apply_gradients(...)`, Keras 3 `optimizer.apply(grads, variables)`."""
    if method in ("backward", "manual_backward", "apply_gradients", "train_on_batch"):
        return True
    name = receiver or ""
    if method == "step":
        return bool(_OPTIMIZER_NAME.search(name) or "scaler" in name.lower()) and "sched" not in name.lower()
    if method == "gradient":
        return "tape" in name.lower()
    if method == "apply":
        return bool(_OPTIMIZER_NAME.search(name))
    return False


# -- what per-step rules report, by name (shared by the rules and the trigger filter's shapes) --------
# Tensor methods that read the value back to the host (GL201).
SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})
# Step hooks of frameworks whose caller reads the returned value on the host every step, by base
# class: the framework's own version returns it read back (SpeechBrain's `Brain.fit_batch` returns
# `loss.detach().cpu()`, and `Brain.fit` averages it with `float()`), so an override that does the
# same adds no wait (GL201).
HOST_READ_HOOKS: dict[str, frozenset[str]] = {
    "speechbrain.Brain": frozenset({"fit_batch"}),
    "speechbrain.core.Brain": frozenset({"fit_batch"}),
}
# NaN/Inf predicates, as `torch.*` functions and tensor methods.
NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})
# Functions whose result's size depends on the values of their input.
SELECTIONS = frozenset({"torch.nonzero", "torch.argwhere", "torch.masked_select", "torch.unique"})
# Element-wise comparisons and predicates: their result is a boolean mask.
MASK_METHODS = frozenset({"eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "isin", "signbit"})
# `torch.*` functions whose truth value is read: a bool computed on the device, or a reduction.
TORCH_PREDICATES = frozenset({"torch.equal", "torch.allclose", "torch.any", "torch.all", "torch.is_nonzero"})
# Names of functions that evaluate a model (GL301).  Kept narrow on purpose: `validate_args()` or
# `test_inputs()` are not evaluation, and a false positive costs more than a miss.
EVALUATION_NAME = re.compile(
    r"^_?(run_|do_)?(evaluate|evaluation|validate|validation|eval|val|test)"
    r"(_(model|models|epoch|loop|step|steps|one_epoch|net|network|fn|all|dataset|data|set|split|metrics|accuracy|loss))?$"
)
# Logging levels that log routinely (GL302); warnings and errors are events, not per-step logging.
LOG_METHODS = frozenset({"info"})
# The libraries whose functions log (logging_calls.py: `logging.info`, `wandb.log`, `mlflow.log_*`,
# `dllogger.log`), by the first name of their modules.
LOGGING_LIBRARIES = frozenset({"logging", "wandb", "mlflow", "dllogger"})

# -- which expressions are tensors (pytorch.TensorNames, and its reading of CPython's tree) ----------
# Names of models, not batches or tensors: `model`, `self.net`, `encoder`, `ema_model`.
MODULE_NAME = re.compile(
    r"(^|_)(model|net|network|module|encoder|decoder|backbone|head|teacher|student|ema|critic|actor|policy"
    r"|generator|discriminator|classifier|transformer|unet|vae|lm)s?$",
    re.I,
)
# Methods whose result is a tensor when their receiver is one (reductions and element-wise ops).
TENSOR_METHODS = frozenset(
    "sum mean max min norm std var prod argmax argmin amax amin count_nonzero any all abs sqrt exp log "
    "float double half bfloat16 detach clone squeeze unsqueeze flatten view reshape eq ne gt lt ge le "
    "isnan isinf isfinite sigmoid softmax log_softmax".split()
)
# `torch.<name>` functions that do not return a tensor (or whose tensor is on the host anyway).
TORCH_NOT_TENSOR = re.compile(
    r"^(get_|is_|set_|manual_seed|device|dtype|Size|no_grad|compile|save|load|from_numpy|tensor|as_tensor)"
)
# Names of what returns a loss: `criterion(out, y)`, `loss_fn(...)`.
LOSSY_NAME = re.compile(r"(^|_)(loss|losses|criterion|loss_fn|lossfn|loss_func|loss_function)$", re.I)

# The first TensorFlow whose tf.data ends every pipeline with a prefetch by itself
# (`inject_prefetch`, on by default), and how code turns that off: itself, or the autotuning the
# injected prefetch uses.  Every match of OPTS_OUT_OF_PREFETCH spells one of its tokens (what the
# prefilter asks of a file where TensorFlow injects the prefetch: engine.py).
INJECT_PREFETCH_SINCE = (2, 13)
OPTS_OUT_OF_PREFETCH = re.compile(r"(inject_prefetch|autotune\s*\.\s*enabled)\s*=\s*False")
OPTS_OUT_OF_PREFETCH_TOKENS = ("inject_prefetch", "autotune")


def tensorflow_injects_prefetch(target_tensorflow: tuple[int, int] | None) -> bool:
    """Whether the TensorFlow a project targets ends tf.data pipelines with a prefetch by itself
    (a project whose TensorFlow is not known gets today's, which does)."""
    return target_tensorflow is None or target_tensorflow >= INJECT_PREFETCH_SINCE


# A convolution layer or function, by its qualified name, with its dimensions (1, 2 or 3) as group 1:
# what a module builds (pytorch.py) and what a network class of another module builds (project.py).
CONVOLUTION_LAYER = re.compile(
    r"^torch\.nn\.(?:Conv|ConvTranspose|LazyConv|functional\.conv|functional\.conv_transpose)([123])d$"
)
