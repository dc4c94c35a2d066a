"""GL402 deprecated-amp-api."""

from __future__ import annotations

import dataclasses
import re
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.facts import TORCH
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import Invalid, Rule, Valid

# The last names of the deprecated API (a cheap test before resolving an attribute).
_DEPRECATED_NAMES = frozenset({"autocast", "GradScaler", "custom_fwd", "custom_bwd"})
# A branch chosen by a version test keeps the old API on purpose (for old PyTorch versions).
_VERSION_TEST = re.compile(r"version|greater|less|hasattr|older|newer|torch_?\d|_ge_|_lt_|[<>]=?", re.IGNORECASE)


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

    So in a project whose stated floor (its requirements, `target-torch`, or the version its
    README names) is older than the PyTorch that has the new form, which cannot switch yet, the
    finding is a hint: held back unless hints are shown, with that reason.  A module that already
    calls a `torch.amp` form needing as new a PyTorch (`torch.amp.autocast("cuda")` beside an old
    `torch.cpu.amp.autocast()`) runs on one that has it, whatever the floor says: there the
    finding is no hint, and the fix is offered.

    ## Example
    ```python
    import torch
    from torch.cuda.amp import GradScaler, autocast

    scaler = GradScaler()
    with autocast(dtype=torch.float16):
        loss = model(x)
    ```
    Use instead:
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.float16):
        loss = model(x)
    ```

    ## Fix (safe)
    Rewrites the call to `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`
    (`"cpu"` for the `torch.cpu.amp` forms), turning `autocast`'s positional arguments into keywords
    because the two signatures order them differently, and `custom_fwd`/`custom_bwd` into
    `torch.amp.custom_fwd(..., device_type="cuda")`.  The old functions are exactly these calls
    with the same defaults, so behaviour is unchanged.  An import the rewritten calls leave unused
    (`from torch.cuda.amp import autocast`, `from torch.cuda import amp`) is removed; `import torch`
    is added if needed.  Calls with `*args`, and the names used other than by calling them, are
    reported without a fix.

    The new forms need PyTorch 2.0 (`autocast`), 2.3 (`GradScaler`) and 2.4 (`custom_fwd`,
    `custom_bwd`): a project whose requirements allow an older `torch` (or that sets `target-torch`
    lower) is not offered them.  When only prose names an older PyTorch -- the README or INSTALL.md
    ("PyTorch 1.8.1", "PyTorch ≥ 1.8"), a message in setup.py ("Requires PyTorch >= 1.8") -- the
    fix is not offered either (a version the project says it supports would break), and the
    finding says where that version is named.

    In test files the finding is reported without a fix unless `fix-tests = true`: a test may
    exercise the deprecated API on purpose, so there the finding is a hint.  A finding without a
    fix always says why.
    """

    code = "GL402"
    name = "deprecated-amp-api"
    message = "the `torch.cuda.amp` API is deprecated; use its `torch.amp` form with a device argument"
    _specific = "`{old}` is deprecated; use `{new}`"
    requires = {TORCH}
    tokens = ("cuda.amp", "cpu.amp", "cuda import amp", "cpu import amp")
    triggers = (("amp",),)  # every deprecated name it reports is under an `amp` module
    fix_applicability = Applicability.SAFE
    reported_in_tests = True  # a deprecated API is one in test code too
    fixes_test_files = False  # a test may exercise the old API on purpose (`fix-tests = true` fixes it)
    hint_in_tests = "a test file: a test may exercise the deprecated API on purpose, and it runs as fast"

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
    # The oldest PyTorch with each new form.
    _MIN_TORCH = {"autocast": (2, 0), "scaler": (2, 3), "custom": (2, 4)}
    # The old autocast's parameters in order; the new one takes `device_type` first, then `dtype`.
    _AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")

    VALID = [
        # the torch.amp API
        Valid(
            """
            import torch
            with torch.amp.autocast("cuda"):
                pass
            s = torch.amp.GradScaler()
            """,
        ),
        # comments and strings
        Valid(
            """
            import torch
            # torch.cuda.amp.autocast() is deprecated
            x = 'torch.cuda.amp.GradScaler()'
            """,
        ),
        # fallbacks for old PyTorch versions (lightning, timm)
        Valid(
            """
            import torch
            scaler = torch.amp.GradScaler(device="cuda") if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()
            try:
                s = torch.amp.GradScaler(device="cuda")
            except (AttributeError, TypeError):
                s = torch.cuda.amp.GradScaler()
            """,
        ),
    ]
    INVALID = [
        # the fix drops the import its last use leaves dead
        Invalid(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast

            scaler = GradScaler(init_scale=1024)  # keep this comment
            for x in loader:
                with autocast():
                    loss = model(x)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
            """,
            "4:10",
            "6:10",
            fixed="""
            import torch

            scaler = torch.amp.GradScaler("cuda", init_scale=1024)  # keep this comment
            for x in loader:
                with torch.amp.autocast("cuda"):
                    loss = model(x)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
            """,
        ),
        # autocast's positional arguments become keywords
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast(True, torch.bfloat16):
                y = model(x)
            """,
            "2:6",
            fixed="""
            import torch
            with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):
                y = model(x)
            """,
        ),
        # aliases and a module import
        Invalid(
            """
            import torch.cuda.amp as amp
            from torch.cuda.amp import autocast as ac
            s = amp.GradScaler()
            with ac(enabled=False):
                pass
            """,
            "3:5",
            "4:6",
            fixed="""
            import torch
            s = torch.amp.GradScaler("cuda")
            with torch.amp.autocast("cuda", enabled=False):
                pass
            """,
        ),
        # `from torch.cuda import amp` used twice: both uses go in one pass, and the import with them
        Invalid(
            """
            import torch
            from torch import nn
            from torch.cuda import amp

            scaler = amp.GradScaler(enabled=use_amp)
            with amp.autocast(enabled=use_amp):
                loss = model(x)
            """,
            "5:10",
            "6:6",
            fixed="""
            import torch
            from torch import nn

            scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
            with torch.amp.autocast("cuda", enabled=use_amp):
                loss = model(x)
            """,
        ),
        # an import still used elsewhere stays
        Invalid(
            """
            import torch
            from torch.cuda.amp import GradScaler
            scaler = GradScaler()
            assert isinstance(scaler, GradScaler)
            """,
            "3:10",
            fixed="""
            import torch
            from torch.cuda.amp import GradScaler
            scaler = torch.amp.GradScaler("cuda")
            assert isinstance(scaler, GradScaler)
            """,
        ),
        # custom_fwd/custom_bwd decorators and torch.cpu.amp
        Invalid(
            """
            import torch
            class F(torch.autograd.Function):
                @staticmethod
                @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
                def forward(ctx, x):
                    return x
                @staticmethod
                @torch.cuda.amp.custom_bwd
                def backward(ctx, g):
                    return g
            with torch.cpu.amp.autocast():
                pass
            """,
            "4:6",
            "8:5",
            "11:6",
            fixed="""
            import torch
            class F(torch.autograd.Function):
                @staticmethod
                @torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")
                def forward(ctx, x):
                    return x
                @staticmethod
                @torch.amp.custom_bwd(device_type="cuda")
                def backward(ctx, g):
                    return g
            with torch.amp.autocast("cpu"):
                pass
            """,
        ),
        # *args: no fix
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast(*flags):
                pass
            """,
            "2:6",
            messages=(
                "`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast` (no fix: `*args` cannot be mapped "
                "to the new signature's positions)",
            ),
        ),
        # referenced, to be called later: no fix
        Invalid(
            """
            import torch
            amp_autocast = torch.cuda.amp.autocast if use_amp else contextlib.nullcontext
            with amp_autocast():
                pass
            def step(scaler: Optional[torch.cuda.amp.GradScaler] = None):
                pass
            """,
            "2:16",
            messages=(
                "`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast` (no fix: the name is referenced, "
                "not called here: its calls take another signature)",
            ),
        ),
        # in a test file: a hint, and no fix unless `fix-tests = true`
        Invalid(
            """
            import torch
            def test_scaler_state():
                scaler = torch.cuda.amp.GradScaler()
            """,
            "3:14",
            path="tests/test_amp.py",
            messages=(
                "`torch.cuda.amp.GradScaler` is deprecated; use `torch.amp.GradScaler` (no fix: a test file; "
                "`fix-tests = true` fixes it)",
            ),
            hints=("a test file: a test may exercise the deprecated API on purpose, and it runs as fast",),
        ),
        # a project that supports PyTorch 1.10 cannot move to the new forms: hints, and no fix;
        # the new autocast is in PyTorch 2.0, so a project on 2.1 can move: no hint
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            with torch.cuda.amp.autocast():
                loss = model(x)
            """,
            "2:10",
            "3:6",
            target_torch=(1, 10),
            messages=(
                "`torch.cuda.amp.GradScaler` is deprecated; use `torch.amp.GradScaler` (no fix: it needs PyTorch "
                "2.3; the project supports PyTorch 1.10)",
                "`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast` (no fix: it needs PyTorch 2.0; "
                "the project supports PyTorch 1.10)",
            ),
            hints=(
                "the project supports PyTorch 1.10 (its requirements or `target-torch`), which lacks "
                "`torch.amp.GradScaler` (PyTorch 2.3); the deprecated API is as fast",
                "the project supports PyTorch 1.10 (its requirements or `target-torch`), which lacks "
                "`torch.amp.autocast` (PyTorch 2.0); the deprecated API is as fast",
            ),
        ),
        # the module already calls the new autocast: it runs on a PyTorch that has it
        Invalid(
            """
            import torch
            with torch.amp.autocast("cuda"):
                loss = model(x)
            with torch.cpu.amp.autocast():
                loss = model(x)
            """,
            "4:6",
            target_torch=(1, 10),
            hints=(None,),
            fixed="""
            import torch
            with torch.amp.autocast("cuda"):
                loss = model(x)
            with torch.amp.autocast("cpu"):
                loss = model(x)
            """,
        ),
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast():
                loss = model(x)
            """,
            "2:6",
            target_torch=(2, 1),
            hints=(None,),
            fixed="""
            import torch
            with torch.amp.autocast("cuda"):
                loss = model(x)
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        old = self.ctx.call_qualified_name(node)
        if old not in self.DEPRECATED or self._is_compatibility_fallback(node):
            return
        new, device, shape = self.DEPRECATED[old]
        message = self._specific.format(old=old, new=new)
        fix = self._call_fix(node, new, device, shape)
        if fix is None:
            message += f" (no fix: {self._why_no_call_fix(node)})"
        self.report(node, message=message, fix=fix, hint=self._old_torch_hint(new, shape))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """`amp_autocast = torch.cuda.amp.autocast`: the old API referenced, to be called later."""
        if node.attr.value not in _DEPRECATED_NAMES:
            return
        parent = self.ctx.parent(node)
        if isinstance(parent, (cst.Call, cst.Decorator, cst.Attribute, cst.ImportFrom, cst.ImportAlias)):
            return  # a call or decorator (reported there), a longer name, an import
        if any(isinstance(a, cst.Annotation) for a in self.ctx.ancestors(node)):
            return  # `scaler: Optional[torch.cuda.amp.GradScaler]` names the type, which stays
        old = self.ctx.qualified_name(node)
        if old in self.DEPRECATED and not self._is_compatibility_fallback(node):
            new, _, shape = self.DEPRECATED[old]
            message = self._specific.format(old=old, new=new)
            message += " (no fix: the name is referenced, not called here: its calls take another signature)"
            self.report(node, message=message, hint=self._old_torch_hint(new, shape))

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
        fix = Fix(
            Applicability.SAFE,
            f'Use `{new}(device_type="{device}")`',
            {node.decorator: replacement},
            imports,
            min_torch=self._needs("custom"),
        )
        fix = self._with_import_cleanup(fix, node.decorator)
        self.report(
            node, message=self._specific.format(old=old, new=new), fix=fix, hint=self._old_torch_hint(new, "custom")
        )

    def _needs(self, shape: str) -> tuple[int, int] | None:
        """The PyTorch the new form of `shape` needs beyond what the module already runs: None
        where the module calls a `torch.amp` form that needs as much (it cannot run on an older
        PyTorch today, so the fix breaks no version the project still has)."""
        needs = self._MIN_TORCH[shape]
        return None if self._proven_torch >= needs else needs

    @cached_property
    def _proven_torch(self) -> tuple[int, int]:
        """The newest PyTorch the module's own calls of the `torch.amp` forms need ((0, 0): none)."""
        shapes = {new: shape for new, _, shape in self.DEPRECATED.values()}
        needed = [
            self._MIN_TORCH[shapes[qualified]]
            for call in self.ctx.index.nodes("Call")
            if (qualified := self.ctx.call_qualified_name(call)) in shapes
        ]
        return max(needed, default=(0, 0))

    def _old_torch_hint(self, new: str, shape: str) -> str | None:
        """Why the finding is a hint where the project supports a PyTorch older than the one
        that has `new`: it cannot move yet, and the old API runs exactly as fast."""
        floor = self.ctx.torch_floor
        needs = self._needs(shape)
        if floor is None or needs is None or floor[0] >= needs:
            return None
        version, where = floor
        return (
            f"the project supports PyTorch {'.'.join(map(str, version))} ({where}), which lacks `{new}` "
            f"(PyTorch {'.'.join(map(str, needs))}); the deprecated API is as fast"
        )

    def _why_no_call_fix(self, call: cst.Call) -> str:
        """Why `_call_fix` offers nothing for `call`."""
        if any(arg.star == "*" for arg in call.args):
            return "`*args` cannot be mapped to the new signature's positions"
        return f"more positional arguments than the old `autocast` takes ({len(self._AUTOCAST_POSITIONAL)})"

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
        fix = Fix(
            Applicability.SAFE,
            f'Use `{new}("{device}", ...)`',
            {call: replacement},
            imports,
            min_torch=self._needs(shape),
        )
        return self._with_import_cleanup(fix, call.func)

    def _with_import_cleanup(self, fix: Fix, func: cst.BaseExpression) -> Fix:
        """Let the fixer drop the import of the deprecated name the call went through
        (`from torch.cuda.amp import autocast`, `from torch.cuda import amp`) once nothing uses it."""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return fix
        qualified = self.ctx.qualified_name(root)
        if qualified is None or not qualified.startswith(("torch.cuda.amp", "torch.cpu.amp")):
            return fix
        return dataclasses.replace(fix, unbinds=(root.value,))
