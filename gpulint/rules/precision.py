"""GL4xx: precision and compilation -- is the GPU doing the cheap kind of arithmetic?

GL401, GL403 and GL404 are whole-module hints: they look at a module that trains a PyTorch model on
an accelerator with its own loop (a `.backward()` in a step loop) and report once, where the fix
belongs.  Modules whose precision and compilation are configured elsewhere -- Accelerate, Fabric,
DeepSpeed, Lightning modules (the Trainer's `precision=`, GL803) -- are left alone.  Any mention of
the feature outside a comment (an `--amp` flag, `args.compile`) counts as handled: a hint that the
user has already considered is noise.
"""

from __future__ import annotations

import io
import re
import tokenize

import libcst as cst

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.analysis.imports import dotted_name
from gpulint.linter.rule import Rule

# Frameworks that own precision and compilation: their config, not the script, decides.
_MANAGED_ELSEWHERE = ("accelerate", "lightning", "deepspeed", "colossalai", "composer")

_MIXED_PRECISION_TEXT = re.compile(
    r"autocast|grad_?scaler|bfloat16|float16|\bhalf\b|(?<![a-z0-9])amp(?![a-z])|mixed.precision|"
    r"(?<![a-z0-9])(fp16|bf16)(?![a-z0-9])",
    re.IGNORECASE,
)
_COMPILE_TEXT = re.compile(r"(?<![a-z0-9])compile(?![a-z])|torch\.jit|dynamo|torchscript|tensorrt|\bjit\b", re.IGNORECASE)
_REGEX_COMPILE = re.compile(r"\b(re|regex)\s*\.\s*compile\b")
_VERSION_TEST = re.compile(r"version|greater|less|hasattr|older|newer|torch_?\d|_ge_|_lt_|[<>]=?", re.IGNORECASE)
_TF32_TEXT = re.compile(r"tf32|float32_matmul_precision|fp32_precision", re.IGNORECASE)


def code_without_comments(ctx: FileContext) -> str:
    """The module's source with comments removed (strings kept: a `--amp` flag is real code).

    Cached on the context: three rules ask for it.  If the tokenizer disagrees with libcst about the
    source, the full text is used, which can only make the hints quieter.
    """
    cached = ctx.__dict__.get("_gpulint_code_without_comments")
    if cached is not None:
        return cached
    code = ctx.source_text
    try:
        kept = [tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type != tokenize.COMMENT]
        text = " ".join(kept)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        text = code
    ctx.__dict__["_gpulint_code_without_comments"] = text
    return text


def _backward_step_calls(ctx: FileContext) -> list[cst.Call]:
    """`<x>.backward(...)` step calls that run in a step loop (or a step function), in source order."""
    found = []
    for call in ctx.index.nodes("Call"):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and ctx.loops.is_step_call(call):
            if ctx.loops.per_step(call):
                found.append(call)
    return found


def trains_pytorch_itself(ctx: FileContext) -> list[cst.Call]:
    """The backward calls of a module that trains a PyTorch model on an accelerator with its own
    loop and manages precision itself; empty when the module is anything else."""
    cached = ctx.__dict__.get("_gpulint_own_torch_training")
    if cached is not None:
        return cached
    calls: list[cst.Call] = []
    if ctx.uses_torch and ctx.accelerated and not ctx.uses(*_MANAGED_ELSEWHERE) and not ctx.loops.lightning_steps:
        # A training script builds an optimizer and steps in a loop; helpers that only call
        # `.backward()` (library utilities, gradient checks) are not one.
        if ctx.loops.step_loops and optimizer_construction(ctx) is not None:
            calls = _backward_step_calls(ctx)
    ctx.__dict__["_gpulint_own_torch_training"] = calls
    return calls


def uses_mixed_precision(ctx: FileContext) -> bool:
    return bool(_MIXED_PRECISION_TEXT.search(code_without_comments(ctx)))


def optimizer_construction(ctx: FileContext) -> cst.Call | None:
    """The first call that builds an optimizer (`torch.optim.AdamW(model.parameters(), ...)`)."""
    for call in ctx.index.nodes("Call"):
        if ctx.values.is_kind(call, "optimizer"):
            return call
    return None


def _trained_model(ctx: FileContext, optimizer: cst.Call) -> str | None:
    """`model` in `AdamW(model.parameters(), ...)`: the dotted name whose parameters are trained."""
    for arg in optimizer.args:
        value = arg.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value in ("parameters", "named_parameters"):
                return dotted_name(value.func.value)
    return None


def _model_assignment(ctx: FileContext, optimizer: cst.Call) -> cst.SimpleStatementLine | None:
    """The last `model = ...` line before the optimizer is built, in the same block."""
    name = _trained_model(ctx, optimizer)
    if name is None:
        return None
    statement = ctx.statement_of(optimizer)
    block = ctx.parent(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or statement not in block.body:
        return None
    before = list(block.body)[: list(block.body).index(statement)]
    for candidate in reversed(before):
        if isinstance(candidate, cst.SimpleStatementLine) and len(candidate.body) == 1:
            small = candidate.body[0]
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and dotted_name(small.targets[0].target) == name:
                return candidate
    return None


def _insert_after(statement: cst.SimpleStatementLine, code: str, applicability: Applicability, message: str, imports=()) -> Fix:
    new = cst.parse_statement(code)
    return Fix(applicability, message, {statement: cst.FlattenSentinel([statement, new])}, tuple(imports))


def _insert_before(statement: cst.CSTNode, code: str, applicability: Applicability, message: str, imports=()) -> Fix:
    new = cst.parse_statement(code).with_changes(leading_lines=statement.leading_lines)
    return Fix(applicability, message, {statement: cst.FlattenSentinel([new, statement.with_changes(leading_lines=())])}, tuple(imports))


class NoMixedPrecision(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop (a `.backward()` in a
    step loop) and never uses mixed precision: no `torch.autocast`, no `GradScaler`, no bf16/fp16,
    no `--amp` flag.  Reported once, at the first `.backward()` of the step loop.  Modules whose
    precision is set elsewhere (Accelerate, Fabric, DeepSpeed, Lightning modules) are not reported.

    ## Why it is slow
    In fp32 the tensor cores sit mostly idle: an A100 does 19.5 TFLOPS in fp32 (156 with TF32) and
    312 TFLOPS in bf16/fp16, and half-width activations halve the memory traffic.  Training under
    autocast is typically 1.5-3x faster on Volta and newer GPUs, with the same accuracy for almost
    every model.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Use instead:
    ```python
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix
    None: where the autocast region starts and ends (forward and loss, not the backward or the
    optimizer step), bf16 versus fp16 with a `GradScaler`, and which layers must stay in fp32 are
    decisions about the model that a linter cannot make.  A hint: off by default, on with
    `--select GL401` (or `ALL`).
    """

    code = "GL401"
    needs_accelerator = True
    needs_step = True
    name = "no-mixed-precision"
    message = "training runs in fp32 with no autocast/AMP: bf16 or fp16 mixed precision is typically 1.5-3x faster on tensor cores"
    tokens = ("backward",)
    default = "hint"
    fix_applicability = None

    def finish(self) -> None:
        backward_calls = trains_pytorch_itself(self.ctx)
        if backward_calls and not uses_mixed_precision(self.ctx):
            self.report(backward_calls[0])


class DeprecatedAmpApi(Rule):
    """
    ## What it finds
    `torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)`, `torch.cuda.amp.custom_fwd`
    / `custom_bwd`, and their `torch.cpu.amp` twins, however imported (`from torch.cuda.amp import
    autocast as ac`, `import torch.cuda.amp as amp`).

    ## Why it is slow
    It is not slower today: these are thin wrappers that emit a `FutureWarning` (deprecated since
    PyTorch 2.4) and will be removed.  The device-generic `torch.amp` API is the one that keeps
    working, and the one other tools (and other accelerators) understand.

    ## Example
    ```python
    from torch.cuda.amp import GradScaler, autocast
    scaler = GradScaler()
    with autocast(dtype=torch.float16):
        loss = model(x)
    ```
    Use instead:
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.float16):
        loss = model(x)
    ```

    ## Fix (safe)
    Rewrites the call to `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`
    (`"cpu"` for the `torch.cpu.amp` forms), turning `autocast`'s positional arguments into keywords
    because the two signatures order them differently, and `custom_fwd`/`custom_bwd` into
    `torch.amp.custom_fwd(..., device_type="cuda")`.  The old functions are exactly these calls
    with the same defaults, so behaviour is unchanged.  The `from torch.cuda.amp import ...` name is
    dropped from its import once its last use is rewritten; `import torch` is added if needed.
    Calls with `*args`, and the names used other than by calling them, are reported without a fix.
    """

    code = "GL402"
    name = "deprecated-amp-api"
    message = "the `torch.cuda.amp` API is deprecated; use its `torch.amp` form with a device argument"
    _specific = "`{old}` is deprecated; use `{new}`"
    tokens = ("cuda.amp", "cpu.amp", "cuda import amp", "cpu import amp")
    fix_applicability = Applicability.SAFE

    # qualified name -> (new qualified name, device, how arguments move)
    DEPRECATED = {
        "torch.cuda.amp.autocast": ("torch.amp.autocast", "cuda", "autocast"),
        "torch.cuda.amp.autocast_mode.autocast": ("torch.amp.autocast", "cuda", "autocast"),
        "torch.cpu.amp.autocast": ("torch.amp.autocast", "cpu", "autocast"),
        "torch.cpu.amp.autocast_mode.autocast": ("torch.amp.autocast", "cpu", "autocast"),
        "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", "cuda", "scaler"),
        "torch.cuda.amp.grad_scaler.GradScaler": ("torch.amp.GradScaler", "cuda", "scaler"),
        "torch.cpu.amp.GradScaler": ("torch.amp.GradScaler", "cpu", "scaler"),
        "torch.cpu.amp.grad_scaler.GradScaler": ("torch.amp.GradScaler", "cpu", "scaler"),
        "torch.cuda.amp.custom_fwd": ("torch.amp.custom_fwd", "cuda", "custom"),
        "torch.cuda.amp.autocast_mode.custom_fwd": ("torch.amp.custom_fwd", "cuda", "custom"),
        "torch.cuda.amp.custom_bwd": ("torch.amp.custom_bwd", "cuda", "custom"),
        "torch.cuda.amp.autocast_mode.custom_bwd": ("torch.amp.custom_bwd", "cuda", "custom"),
    }
    # The old autocast's parameters in order; the new one takes `device_type` first, then `dtype`.
    _AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")

    def visit_Call(self, node: cst.Call) -> None:
        old = self.ctx.call_qualified_name(node)
        if old not in self.DEPRECATED or self._is_compatibility_fallback(node):
            return
        new, device, shape = self.DEPRECATED[old]
        self.report(node, message=self._specific.format(old=old, new=new), fix=self._call_fix(node, new, device, shape))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        # `@torch.cuda.amp.custom_fwd` without parentheses (the called form is a Call).
        if isinstance(node.decorator, cst.Call):
            return
        old = self.ctx.qualified_name(node.decorator)
        if old not in self.DEPRECATED:
            return
        new, device, _ = self.DEPRECATED[old]
        text, imports = self.ctx.reference(new)
        replacement = cst.parse_expression(f'{text}(device_type="{device}")')
        fix = Fix(Applicability.SAFE, f"Use `{new}(device_type=\"{device}\")`", {node.decorator: replacement}, imports)
        fix = self._with_import_cleanup(fix, node.decorator)
        self.report(node, message=self._specific.format(old=old, new=new), fix=fix)

    def _is_compatibility_fallback(self, node: cst.CSTNode) -> bool:
        """The old API kept for old PyTorch versions: in an `except` handler (the new API failed),
        or in a branch chosen by a version test (`... if TORCH_GE_2_4 else torch.cuda.amp...`)."""
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.ExceptHandler):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and _VERSION_TEST.search(self.ctx.code(ancestor.test)):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
        return False

    def _call_fix(self, call: cst.Call, new: str, device: str, shape: str) -> Fix | None:
        if any(arg.star == "*" for arg in call.args):
            return None  # positions cannot be mapped
        device_arg = cst.Arg(cst.SimpleString(f'"{device}"'))
        args = list(call.args)
        if shape == "autocast":
            positional = [a for a in args if a.keyword is None and not a.star]
            if len(positional) > len(self._AUTOCAST_POSITIONAL):
                return None
            converted = []
            for index, arg in enumerate(args):
                if arg.keyword is None and not arg.star:
                    arg = arg.with_changes(
                        keyword=cst.Name(self._AUTOCAST_POSITIONAL[index]),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    )
                converted.append(arg)
            args = [device_arg, *converted]
        elif shape == "scaler":
            args = [device_arg, *args]  # same parameters, `device` first
        else:  # custom_fwd / custom_bwd: `device_type` is keyword-only
            keyword = cst.Arg(
                cst.SimpleString(f'"{device}"'),
                keyword=cst.Name("device_type"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
            if args:
                last = args[-1]
                args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args = [*args, keyword]
        if shape != "custom" and len(args) > 1:
            args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        text, imports = self.ctx.reference(new)
        replacement = call.with_changes(func=cst.parse_expression(text), args=args)
        fix = Fix(Applicability.SAFE, f"Use `{new}(\"{device}\", ...)`", {call: replacement}, imports)
        return self._with_import_cleanup(fix, call.func)

    def _with_import_cleanup(self, fix: Fix, func: cst.BaseExpression) -> Fix:
        """When `func` is a name from `from torch.cuda.amp import X` used nowhere else, drop it from
        the import in the same fix, so the fixed module does not keep a dead deprecated import."""
        if not isinstance(func, cst.Name):
            return fix
        local = func.value
        # Every occurrence of the name as a word: the import and this use, or it is used elsewhere.
        if len(re.findall(rf"(?<![\w.]){re.escape(local)}(?!\w)", self.ctx.source_text)) != 2:
            return fix
        for node in self.ctx.index.nodes("ImportFrom"):
            if isinstance(node.names, cst.ImportStar) or node.relative:
                continue
            module = dotted_name(node.module) if node.module is not None else None
            if module is None or not module.startswith(("torch.cuda.amp", "torch.cpu.amp")):
                continue
            for alias in node.names:
                bound = alias.asname.name.value if alias.asname is not None else alias.name.value
                if bound == local:
                    replacements = dict(fix.replacements)
                    replacements.update(_without_alias(self.ctx, node, alias))
                    return Fix(fix.applicability, fix.message, replacements, fix.imports)
        return fix


def _without_alias(ctx: FileContext, node: cst.ImportFrom, alias: cst.ImportAlias) -> dict:
    remaining = [a for a in node.names if a is not alias]
    if not remaining:
        statement = ctx.parent(node)
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            return {statement: cst.RemovalSentinel.REMOVE}
        return {node: cst.RemovalSentinel.REMOVE}
    last = node.names[-1]
    if remaining[-1] is not last:
        # The removed alias was the last: its predecessor takes over its (absent or trailing) comma.
        remaining[-1] = remaining[-1].with_changes(comma=last.comma)
    return {node: node.with_changes(names=remaining)}


class NoCompile(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop and never compiles it:
    no `torch.compile`, `model.compile()`, TorchScript, or `--compile` flag.  Reported once, at the
    line that builds the model whose parameters the optimizer trains (or the optimizer, or the first
    `.backward()` when the model cannot be found).

    ## Why it is slow
    In eager mode every operation is a separate kernel launch that reads and writes memory; the
    compiler fuses chains of pointwise operations and cuts Python overhead.  PyTorch 2.0 measured a
    43% average training speed-up over 163 open-source models on an A100 (1.3-2x typical).

    ## Example
    ```python
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    ```
    Use instead:
    ```python
    model = Net().to(device)
    model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters())
    ```

    ## Fix (unsafe)
    Adds `model = torch.compile(model)` after the model's line, when that line is a plain assignment
    in the same block as the optimizer.  Unsafe: compilation can fail on dynamic Python code, costs
    start-up time, and changes the `state_dict` keys the program saves (`_orig_mod.` prefix).  A
    hint: off by default.
    """

    code = "GL403"
    needs_accelerator = True
    needs_step = True
    name = "no-compile"
    message = "the model is trained without `torch.compile`: fused kernels are typically 1.3-2x faster"
    tokens = ("backward",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    def finish(self) -> None:
        backward_calls = trains_pytorch_itself(self.ctx)
        if not backward_calls:
            return
        text = _REGEX_COMPILE.sub("", code_without_comments(self.ctx))
        if _COMPILE_TEXT.search(text):
            return
        optimizer = optimizer_construction(self.ctx)
        assignment = _model_assignment(self.ctx, optimizer) if optimizer is not None else None
        if assignment is None:
            self.report(optimizer if optimizer is not None else backward_calls[0])
            return
        model = dotted_name(assignment.body[0].targets[0].target)
        text, imports = self.ctx.reference("torch.compile")
        fix = _insert_after(
            assignment, f"{model} = {text}({model})", Applicability.UNSAFE, f"Compile the model: `{model} = torch.compile({model})`", imports
        )
        self.report(assignment.body[0].value, fix=fix)


class Fp32Matmul(Rule):
    """
    ## What it finds
    A module that trains a PyTorch model on an accelerator with its own loop, in fp32 (no mixed
    precision: see GL401), without enabling TF32 for matrix multiplications:
    no `torch.set_float32_matmul_precision("high")`, `torch.backends.cuda.matmul.allow_tf32 = True`
    or `fp32_precision = "tf32"`.  Reported once, at the optimizer's construction (or the first
    `.backward()`).  Under autocast most matmuls are already bf16/fp16, so it is not reported there.

    ## Why it is slow
    PyTorch has defaulted to exact fp32 matmuls since 1.12.  On Ampere and newer GPUs TF32 tensor
    cores run them up to 8x faster (A100: 19.5 TFLOPS fp32, 156 TFLOPS TF32) with a 10-bit mantissa
    that deep-learning training tolerates.

    ## Example
    ```python
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ```
    Use instead:
    ```python
    torch.set_float32_matmul_precision("high")
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ```

    ## Fix (unsafe)
    Inserts `torch.set_float32_matmul_precision("high")` before the reported statement.  Unsafe:
    results change in the last bits (a 10-bit mantissa for matmul inputs).  A hint: off by default.
    """

    code = "GL404"
    needs_accelerator = True
    needs_step = True
    name = "fp32-matmul"
    message = "fp32 training without TF32: `torch.set_float32_matmul_precision(\"high\")` makes matmuls up to 8x faster on Ampere+"
    tokens = ("backward",)
    default = "hint"
    fix_applicability = Applicability.UNSAFE

    def finish(self) -> None:
        backward_calls = trains_pytorch_itself(self.ctx)
        if not backward_calls or uses_mixed_precision(self.ctx):
            return
        if _TF32_TEXT.search(code_without_comments(self.ctx)):
            return
        optimizer = optimizer_construction(self.ctx)
        node = optimizer if optimizer is not None else backward_calls[0]
        statement = self.ctx.statement_of(node)
        fix = None
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(self.ctx.parent(statement), (cst.IndentedBlock, cst.Module)):
            text, imports = self.ctx.reference("torch.set_float32_matmul_precision")
            fix = _insert_before(
                statement, f'{text}("high")', Applicability.UNSAFE, 'Enable TF32 matmuls: `torch.set_float32_matmul_precision("high")`', imports
            )
        self.report(node, fix=fix)
