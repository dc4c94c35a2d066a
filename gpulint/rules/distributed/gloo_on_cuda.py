"""GL602 gloo-on-cuda."""

from __future__ import annotations

import re
from functools import cached_property
from typing import TypeGuard

import libcst as cst

from gpulint.linter.analysis.context import is_test_path
from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.loops import SCOPE_TYPES
from gpulint.linter.analysis.nodes import dotted_name, keyword_arg, method_name, positional_args
from gpulint.linter.analysis.pytorch import wraps_for_ranks
from gpulint.linter.analysis.walk import words_under
from gpulint.linter.findings import Applicability, Fix
from gpulint.linter.rule import Invalid, Rule, Valid

INIT_PROCESS_GROUP = ("torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group")
# Words in a condition that make `gloo` a fallback: no CUDA, no NCCL, or a platform without NCCL.
# What sends gradients (or other tensors) through a process group: DDP/FSDP, collectives.
_GRADIENTS_CROSS = re.compile(
    r"^torch\.(nn\.parallel\.(DistributedDataParallel|distributed\.)|distributed\.(fsdp|"
    r"(all_reduce|all_gather|all_gather_into_tensor|reduce_scatter|reduce_scatter_tensor|reduce|broadcast|"
    r"all_to_all|all_to_all_single)$))"
)
# Collectives whose first argument is the tensor (or list of tensors) they send.
_COLLECTIVE = re.compile(
    r"^torch\.distributed\.(all_reduce|all_reduce_multigpu|reduce|broadcast|broadcast_multigpu|reduce_scatter"
    r"|send|recv|isend|irecv)$"
)
_FALLBACK_WORDS = re.compile(
    r"is_available|nccl|platform|win32|windows|darwin|macos|^nt$|os\.name|cpu|cuda|gpu|mps|device", re.IGNORECASE
)


class GlooOnCuda(Rule):
    """
    ## What it finds
    `torch.distributed.init_process_group("gloo")` (or `backend="gloo"`, directly or through a
    variable assigned `"gloo"`) in a module that trains on CUDA.  Gloo chosen as a fallback is not
    reported: `"nccl" if torch.cuda.is_available() else "gloo"`, inside `if sys.platform ==
    "win32":`, after `dist.is_nccl_available()`, or a mixed `"cpu:gloo,cuda:nccl"` string.  Nor
    is a group that only serves RPC (`torch.distributed.rpc` in the module, and no DDP, FSDP or
    collective there): no gradient crosses it; nor a module that computes no gradient and wraps no
    model (no `.backward()`, no training step, no DDP or FSDP: an evaluation or sampling script
    whose group carries barriers, gathered results and a final metric).

    ## Why it is slow
    Gloo all-reduces CUDA tensors by copying them through host memory and the CPU network stack;
    NCCL moves them GPU to GPU over NVLink, PCIe peer-to-peer or GPUDirect RDMA.  For gradient
    all-reduce, NCCL is typically several times faster, and the gap grows with model size and GPU
    count.  PyTorch's documentation: "Use the NCCL backend for distributed GPU training".

    ## Example
    ```python
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group(backend="gloo")
    model = DDP(model.cuda(rank), device_ids=[rank])
    ```
    Use instead:
    ```python
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group(backend="nccl")
    model = DDP(model.cuda(rank), device_ids=[rank])
    ```

    ## Fix (unsafe)
    Replaces the literal `"gloo"` in the call with `"nccl" if torch.cuda.is_available() else
    "gloo"`: NCCL where there are GPUs, and the script still runs where there are none (a CPU-only
    build of PyTorch has no NCCL).  Unsafe: NCCL needs one GPU per process and CUDA tensors for
    every collective; CPU tensors sent through the group (`all_gather_object`, CPU metrics) then
    fail, and NCCL is not available on Windows or macOS.  No fix where the module sends a tensor
    that lives on the host through a collective (`dist.all_reduce(t)` of `t = torch.tensor([...])`):
    NCCL would reject it.
    """

    code = "GL602"
    name = "gloo-on-cuda"
    message = "the `gloo` backend moves CUDA gradients through host memory; use `nccl` for GPU training"
    requires = {TORCH, ACCELERATOR}
    tokens = ("gloo",)
    triggers = (tuple(sorted({name.rsplit(".", 1)[1] for name in INIT_PROCESS_GROUP})),)  # the call it reports
    fix_applicability = Applicability.UNSAFE

    VALID = [
        # a group used only for RPC rendezvous: no collective, no DDP
        Valid(
            """
            import torch
            import torch.distributed as dist
            import torch.distributed.rpc as rpc
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
            model = Net().cuda()
            """,
        ),
        # gloo as a fallback: no CUDA, no NCCL, another platform, NCCL failed; a mixed string
        Valid(
            """
            import sys
            import torch
            import torch.distributed as dist
            from torch.distributed import init_process_group as ipg
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
            backend = "nccl" if dist.is_nccl_available() else "gloo"
            dist.init_process_group(backend)
            if sys.platform == "win32":
                ipg("gloo")
            if not torch.cuda.is_available():
                dist.init_process_group("gloo")
            if torch.cuda.is_available():
                dist.init_process_group("nccl")
            else:
                dist.init_process_group("gloo")
            try:
                dist.init_process_group("nccl")
            except RuntimeError:
                dist.init_process_group("gloo")
            dist.init_process_group("cpu:gloo,cuda:nccl")
            dist.new_group(backend="gloo")  # a CPU side group next to NCCL
            x = torch.zeros(1).cuda()
            """,
        ),
        # an evaluation script: no gradient, no wrapped model; the group gathers results
        Valid(
            """
            import torch
            import torch.distributed as dist
            if world_size > 1:
                dist.init_process_group("gloo", rank=rank, world_size=world_size)
            model = load_model().cuda().eval()
            with torch.no_grad():
                results = [model(batch.cuda()).argmax(-1).tolist() for batch in loader]
            gathered = [None] * world_size
            dist.all_gather_object(gathered, results)
            dist.barrier()
            """,
        ),
        # CPU training: gloo is right
        Valid(
            """
            import torch.distributed as dist
            dist.init_process_group("gloo")
            """,
        ),
        # tests pick gloo to run on CI machines without GPUs (torch's own)
        Valid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group("gloo")
            x = torch.zeros(1).cuda()
            """,
            path="tests/distributed/test_ddp.py",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend='nccl', world_size=2)
            x = torch.zeros(1).cuda()
            """,
        ),
    ]
    INVALID = [
        # host tensors all-reduced through the group (a metric built with `torch.tensor`): NCCL
        # rejects them, so the backend stays
        Invalid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group("gloo")
            model(torch.zeros(1).cuda()).backward()
            values = torch.tensor([correct, total], dtype=torch.float64)
            dist.all_reduce_multigpu([values])
            """,
            "3:1",
            messages=(
                "the `gloo` backend moves CUDA gradients through host memory; use `nccl` for GPU training (no fix: "
                "the script sends host tensors through the group (`dist.all_reduce_multigpu([values])`), which NCCL "
                "does not take)",
            ),
        ),
        # RPC and DDP: the gradients cross the group
        Invalid(
            """
            import torch
            import torch.distributed as dist
            import torch.distributed.rpc as rpc
            from torch.nn.parallel import DistributedDataParallel as DDP
            dist.init_process_group("gloo")
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
            model = DDP(Net().cuda())
            """,
            "5:1",
            fixed="""
            import torch
            import torch.distributed as dist
            import torch.distributed.rpc as rpc
            from torch.nn.parallel import DistributedDataParallel as DDP
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)
            model = DDP(Net().cuda())
            """,
        ),
        # a literal (keyword or positional), or a variable only ever set to it (no fix)
        Invalid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend="gloo")
            dist.init_process_group("gloo", rank=0)
            backend = "gloo"
            dist.init_process_group(backend=backend)
            model(torch.zeros(1).cuda()).backward()
            """,
            "3:1",
            "4:1",
            "6:1",
            fixed="""
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=0)
            backend = "gloo"
            dist.init_process_group(backend=backend)
            model(torch.zeros(1).cuda()).backward()
            """,
        ),
        # the else of a platform check is the ordinary path
        Invalid(
            """
            import sys
            import torch
            import torch.distributed as dist
            if sys.platform == "win32":
                dist.init_process_group("gloo")
            else:
                dist.init_process_group("gloo")
            model(torch.zeros(1).cuda()).backward()
            """,
            "7:5",
            fixed="""
            import sys
            import torch
            import torch.distributed as dist
            if sys.platform == "win32":
                dist.init_process_group("gloo")
            else:
                dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
            model(torch.zeros(1).cuda()).backward()
            """,
        ),
        # the fix swaps the literal only
        Invalid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend='gloo', world_size=2)  # one node
            model(torch.zeros(1).cuda()).backward()
            """,
            "3:1",
            fixed="""
            import torch
            import torch.distributed as dist
            dist.init_process_group(
                backend='nccl' if torch.cuda.is_available() else 'gloo', world_size=2
            )  # one node
            model(torch.zeros(1).cuda()).backward()
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.call_qualified_name(node) not in INIT_PROCESS_GROUP:
            return
        if is_test_path(self.ctx.path):
            return  # tests pick gloo on purpose: it runs on CI machines without GPUs
        if self._rpc_only:
            return  # a rendezvous for RPC: no gradient crosses the group
        if self._trains_nothing:
            return  # an evaluation or sampling script: barriers and a few metrics cross the group
        backend = keyword_arg(node, "backend")
        if backend is None:
            positional = positional_args(node)
            backend = positional[0] if positional else None
        if backend is None:
            return
        value = backend.value
        if _is_gloo(value):
            if not self._is_fallback(value) and self._host_collective is not None:
                message = f"{self.message} (no fix: the script sends host tensors through the group "
                message += f"(`{self._host_collective}`), which NCCL does not take)"
                self.report(node, message=message)
            elif not self._is_fallback(value):
                available, imports = self.ctx.reference("torch.cuda.is_available")
                nccl = cst.parse_expression(f"{_nccl_string(value).value} if {available}() else {value.value}")
                message = 'Use the NCCL backend where there are GPUs: `"nccl" if ... else "gloo"`'
                fix = Fix(Applicability.UNSAFE, message, {value: nccl}, imports)
                self.report(node, fix=fix)
            return
        key = dotted_name(value)
        if key is None or self._is_fallback(node):
            return
        origins = self.ctx.values.assigned.get(key, ())
        # Every value the variable can hold is a plain "gloo" chosen outside any fallback.
        if origins and all(_is_gloo(origin) and not self._is_fallback(origin) for origin in origins):
            self.report(node)

    @cached_property
    def _host_collective(self) -> str | None:
        """A collective of the module on a tensor that lives on the host (`dist.all_reduce(t)` of
        `t = torch.tensor([...])`, `all_reduce_multigpu([t])`), as code; None when there is none."""
        for call in self.ctx.index.nodes("Call"):
            qualified = self.ctx.call_qualified_name(call) or ""
            if not _COLLECTIVE.match(qualified):
                continue
            tensor = keyword_arg(call, "tensor") or keyword_arg(call, "tensor_list")
            if tensor is None:
                positional = positional_args(call)
                tensor = positional[0] if positional else None
            if tensor is None:
                continue
            value = tensor.value
            tensors = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
            if tensors and all(self.ctx.values.on_host(t) for t in tensors):
                return self.ctx.code(call)
        return None

    @cached_property
    def _rpc_only(self) -> bool:
        """The module uses `torch.distributed.rpc` and sends no tensor through a collective or DDP."""
        if not self.ctx.uses("torch.distributed.rpc"):
            return False
        return not any(
            _GRADIENTS_CROSS.match(self.ctx.call_qualified_name(call) or "") for call in self.ctx.index.nodes("Call")
        )

    @cached_property
    def _trains_nothing(self) -> bool:
        """The module computes no gradient (no `.backward()`, no training step) and wraps no model
        for data parallel training: its group carries barriers, gathered results and a final
        metric, not gradients."""
        calls = self.ctx.index.nodes("Call")
        return not (
            self.ctx.loops.step_calls
            or self.ctx.project.steps_elsewhere
            or any(method_name(call) == "backward" or wraps_for_ranks(self.ctx, call) for call in calls)
        )

    def _is_fallback(self, node: cst.CSTNode) -> bool:
        """A conditional expression, an `if`/`elif`/`else` or a `try` around `node` that tests
        for CUDA, NCCL or the platform."""
        child = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.IfExp) and _mentions_fallback(ancestor.test):
                return True
            if isinstance(ancestor, cst.If) and child is ancestor.body and _mentions_fallback(ancestor.test):
                return True
            if isinstance(ancestor, cst.Else):
                # `if <cuda/nccl test>: "nccl" else: "gloo"`; the `else` of a platform check
                # (`if win32: gloo else: gloo`) is the ordinary path and not a fallback.
                owner = self.ctx.parent(ancestor)
                if isinstance(owner, cst.If) and _mentions_fallback(owner.test) and "nccl" in words_under(owner.body):
                    return True
            if isinstance(ancestor, cst.ExceptHandler):
                return True  # `except: backend = "gloo"`: NCCL failed, fall back
            if isinstance(ancestor, SCOPE_TYPES):
                return False
            child = ancestor
        return False


def _is_gloo(node: cst.CSTNode) -> TypeGuard[cst.SimpleString]:
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "gloo"


def _nccl_string(node: cst.SimpleString) -> cst.SimpleString:
    return node.with_changes(value=node.value.replace("gloo", "nccl"))


def _mentions_fallback(node: cst.CSTNode) -> bool:
    return any(_FALLBACK_WORDS.search(word) for word in words_under(node))
