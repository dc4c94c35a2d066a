"""GL7xx: TensorFlow and Keras -- tf.data pipelines, XLA, eager steps."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.context import has_star_kwargs, is_false, keyword_arg, method_name
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.fixes import remove_keyword, set_keyword
from gpulint.linter.rule import Rule

# Positional index of `num_parallel_calls` in each tf.data method.
_PARALLEL_POSITION = {"map": 1, "interleave": 3}


class TfDataSerialMap(Rule):
    """
    ## What it finds
    `Dataset.map(...)` and `Dataset.interleave(...)` on a tf.data pipeline without
    `num_parallel_calls`.

    ## Why it is slow
    Without `num_parallel_calls`, tf.data runs the mapped function on one element at a time, on one
    core: decoding and augmentation become a single-threaded bottleneck while the other cores and
    the GPU wait.  The TF Profiler calls a step input-bound when input takes 5% of step time
    (moderate) or 20% (high); a serial `map` is the most common cause.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices(files).map(decode).batch(64)
    ```
    Use instead:
    ```python
    ds = tf.data.Dataset.from_tensor_slices(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
    ```

    ## Fix (safe)
    Adds `num_parallel_calls=tf.data.AUTOTUNE` (spelled with the module's own `tensorflow` alias).
    Safe: parallel `map` keeps the order of elements (`deterministic` defaults to true), so the
    pipeline yields the same elements in the same order.  Only receivers known to be tf.data
    datasets are reported: `.map` on anything else is never touched.
    """

    code = "GL701"
    name = "tfdata-serial-map"
    message = "tf.data `.{method}()` without `num_parallel_calls` runs on one core"
    tokens = (".map(", ".interleave(")
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        method = method_name(node)
        if method not in _PARALLEL_POSITION or not self.ctx.uses_tensorflow or has_star_kwargs(node):
            return
        if keyword_arg(node, "num_parallel_calls") is not None:
            return
        if len([a for a in node.args if a.keyword is None and not a.star]) > _PARALLEL_POSITION[method]:
            return
        if not self.ctx.values.is_kind(node.func.value, "tfdata"):
            return
        autotune, imports = self.ctx.reference("tensorflow.data.AUTOTUNE")
        self.report(
            node,
            message=self.message.format(method=method),
            fix=set_keyword(
                self.ctx, node, "num_parallel_calls", autotune, Applicability.SAFE,
                f"Run `{method}` in parallel: `num_parallel_calls={autotune}`", imports,
            ),
        )


class XlaDisabled(Rule):
    """
    ## What it finds
    XLA switched off explicitly: `jit_compile=False` in `tf.function(...)` or `model.compile(...)`,
    and `tf.config.optimizer.set_jit(False)`.

    ## Why it is slow
    XLA fuses the many small kernels of a training step into few larger ones, cutting kernel-launch
    overhead and memory traffic; on GPUs it commonly speeds training up by 10-50%.  Keras compiles
    with XLA by default when it can (`jit_compile="auto"`), so `False` throws that away.

    ## Example
    ```python
    model.compile(optimizer="adam", loss="mse", jit_compile=False)
    ```
    Use instead:
    ```python
    model.compile(optimizer="adam", loss="mse")
    ```

    ## Fix (unsafe)
    For `model.compile`, removes `jit_compile=False` (back to Keras' default, "auto"); for
    `tf.function`, sets `jit_compile=True`; for `set_jit(False)`, `set_jit(True)`.  Unsafe: some ops
    have no XLA kernel and then fail to compile, and XLA may change numerics slightly.
    """

    code = "GL704"
    name = "xla-disabled"
    message = "XLA compilation is switched off (`jit_compile=False`): the step runs as many small kernels"
    tokens = ("jit_compile", "set_jit")
    fix_applicability = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.uses_tensorflow:
            return
        qualified = self.ctx.call_qualified_name(node)
        if qualified == "tensorflow.config.optimizer.set_jit":
            if node.args and is_false(node.args[0].value):
                args = [node.args[0].with_changes(value=cst.Name("True")), *node.args[1:]]
                fix = Fix(Applicability.UNSAFE, "Switch XLA on: `set_jit(True)`", {node: node.with_changes(args=args)})
                self.report(node, message="`set_jit(False)` switches XLA off for the whole program", fix=fix)
            return
        flag = keyword_arg(node, "jit_compile")
        if flag is None or not is_false(flag.value):
            return
        if qualified == "tensorflow.function":
            self.report(node, fix=set_keyword(self.ctx, node, "jit_compile", "True", Applicability.UNSAFE, "Compile the function with XLA: `jit_compile=True`"))
        elif method_name(node) == "compile":
            self.report(node, fix=remove_keyword(node, "jit_compile", Applicability.UNSAFE, "Remove `jit_compile=False` (Keras then uses XLA where it can)"))
