"""GL601-GL605: DataParallel, gloo on CUDA, accumulation without no_sync, find_unused_parameters,
loader workers per rank."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, lint, rows

CUDA = "x = torch.zeros(1).cuda()\n"


# -- GL601 ---------------------------------------------------------------------------------------
def test_gl601_dataparallel_however_imported():
    source = """
    import torch
    import torch.nn as nn
    from torch.nn import DataParallel as DP
    from torch.nn.parallel import data_parallel
    a = nn.DataParallel(model)
    b = DP(model)
    c = torch.nn.parallel.DataParallel(model)
    d = data_parallel(model, inputs)
    """
    assert rows(source, "GL601") == [(6, "GL601"), (7, "GL601"), (8, "GL601"), (9, "GL601")]


def test_gl601_negatives():
    source = """
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel
    ok = isinstance(model, nn.DataParallel)  # a type check, not a wrap
    m = DistributedDataParallel(model)
    s = "nn.DataParallel(model)"
    """
    assert codes(source, "GL601") == []


# -- GL602 ---------------------------------------------------------------------------------------
def test_gl602_gloo_literal_keyword_positional_and_variable():
    source = """
    import torch
    import torch.distributed as dist
    dist.init_process_group(backend="gloo")
    dist.init_process_group("gloo", rank=0)
    backend = "gloo"
    dist.init_process_group(backend=backend)
    """ + CUDA
    assert rows(source, "GL602") == [(4, "GL602"), (5, "GL602"), (7, "GL602")]


def test_gl602_fallbacks_are_not_reported():
    source = """
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
    """ + CUDA
    assert codes(source, "GL602") == []


def test_gl602_else_of_a_platform_check_is_the_ordinary_path():
    source = """
    import sys
    import torch
    import torch.distributed as dist
    if sys.platform == "win32":
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo")
    """ + CUDA
    assert rows(source, "GL602") == [(8, "GL602")]


def test_gl602_needs_cuda_and_skips_tests():
    source = 'import torch.distributed as dist\ndist.init_process_group("gloo")\n'
    assert codes(source, "GL602") == []  # CPU training: gloo is right
    accelerated = "import torch\n" + source + CUDA
    assert codes(accelerated, "GL602") == ["GL602"]
    # torch's own distributed tests pick gloo to run on CI without GPUs.
    found = lint(accelerated, "GL602", path="tests/distributed/test_ddp.py")
    assert found == []


def test_gl602_fix_swaps_the_literal_only():
    source = """
    import torch
    import torch.distributed as dist
    dist.init_process_group(backend='gloo', world_size=2)  # one node
    """ + CUDA
    fixed = assert_fix_ok(source, "GL602")
    assert "dist.init_process_group(backend='nccl', world_size=2)  # one node" in fixed
    assert codes(source.replace("'gloo'", "'nccl'"), "GL602") == []


# -- GL603 ---------------------------------------------------------------------------------------
ACCUM = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

model = DDP(net.cuda(), device_ids=[rank])
optimizer = torch.optim.AdamW(model.parameters())
for epoch in range(3):
    for step, batch in enumerate(loader):
        loss = model(batch) / accum_steps
        loss.backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


def test_gl603_reports_the_backward_of_an_accumulating_ddp_loop():
    assert rows(ACCUM, "GL603") == [(10, "GL603")]


def test_gl603_literal_modulo_and_scaler_step():
    source = ACCUM.replace("(step + 1) % accum_steps == 0", "step % 4 == 3").replace(
        "optimizer.step()", "scaler.step(optimizer)"
    )
    assert rows(source, "GL603") == [(10, "GL603")]


def test_gl603_handled_by_no_sync_accumulate_or_the_flag():
    no_sync = ACCUM.replace(
        "        loss = model(batch) / accum_steps\n        loss.backward()\n",
        "        with model.no_sync():\n            loss = model(batch) / accum_steps\n            loss.backward()\n",
    )
    assert codes(no_sync, "GL603") == []
    flag = ACCUM.replace("        loss.backward()\n", "        model.require_backward_grad_sync = (step + 1) % accum_steps == 0\n        loss.backward()\n")
    assert codes(flag, "GL603") == []
    accelerate = """
    from accelerate import Accelerator
    accelerator = Accelerator(gradient_accumulation_steps=4)
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(batch)
            accelerator.backward(loss)
            optimizer.step()
    """
    assert codes(accelerate, "GL603") == []


def test_gl603_accelerate_without_accumulate_is_reported():
    # Found in accelerate's own test scripts (test_checkpointing.py, test_peak_memory_usage.py).
    source = """
    from accelerate import Accelerator
    accelerator = Accelerator()
    for step, batch in enumerate(loader):
        loss = model(**batch).loss / gradient_accumulation_steps
        accelerator.backward(loss)
        if step % gradient_accumulation_steps == 0:
            optimizer.step()
    """
    assert rows(source, "GL603") == [(6, "GL603")]


def test_gl603_negatives():
    # No DDP: accumulation is fine.
    assert codes(ACCUM.replace("model = DDP(net.cuda(), device_ids=[rank])", "model = net.cuda()"), "GL603") == []
    # DDP without accumulation, or with a logging interval only.
    plain = ACCUM.replace("        if (step + 1) % accum_steps == 0:\n            optimizer.step()\n            optimizer.zero_grad()\n",
                          "        optimizer.step()\n        if step % 100 == 0:\n            print(step)\n")
    assert codes(plain, "GL603") == []
    # The backward is under the same guard: nothing is accumulated.
    both = ACCUM.replace("        loss.backward()\n        if (step + 1) % accum_steps == 0:\n",
                         "        if (step + 1) % accum_steps == 0:\n            loss.backward()\n")
    assert codes(both, "GL603") == []
    # `no_sync` only in a comment does not count.
    assert codes(ACCUM + "# TODO: no_sync()\n", "GL603") == ["GL603"]


# -- GL604 ---------------------------------------------------------------------------------------
def test_gl604_every_spelling():
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from lightning.pytorch.strategies import DDPStrategy
    from accelerate.utils import DistributedDataParallelKwargs
    import lightning as L
    from transformers import TrainingArguments
    a = DDP(model, find_unused_parameters=True)
    b = DDPStrategy(find_unused_parameters=True)
    c = DistributedDataParallelKwargs(find_unused_parameters=True)
    d = L.Trainer(strategy="ddp_find_unused_parameters_true")
    e = TrainingArguments("out", ddp_find_unused_parameters=True)
    f = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0], find_unused_parameters=True)
    """
    assert [r for r, _ in rows(source, "GL604")] == [8, 9, 10, 11, 12, 13]


def test_gl604_negatives():
    source = """
    from torch.nn.parallel import DistributedDataParallel as DDP
    a = DDP(model, find_unused_parameters=False)
    b = DDP(model, find_unused_parameters=args.find_unused)
    # find_unused_parameters=True is slow
    # Lightning registering the strategy it offers is not a choice of it:
    strategy_registry.register("ddp_find_unused_parameters_true", cls, find_unused_parameters=True)
    """
    assert codes(source, "GL604") == []


# -- GL605 ---------------------------------------------------------------------------------------
DDP_LOADER = """
import os
import multiprocessing as mp
import torch.distributed as dist
from torch.utils.data import DataLoader as DL
a = DL(ds, num_workers=os.cpu_count(), pin_memory=True)
b = DL(ds, num_workers=mp.cpu_count() - 1, pin_memory=True)
workers = len(os.sched_getaffinity(0))
c = DL(ds, num_workers=workers, pin_memory=True)
"""


def test_gl605_cpu_count_in_every_rank():
    assert rows(DDP_LOADER, "GL605") == [(6, "GL605"), (7, "GL605"), (9, "GL605")]


def test_gl605_negatives():
    # Not distributed: one process may take every core (GL605 is about ranks).
    assert codes(DDP_LOADER.replace("import torch.distributed as dist\n", ""), "GL605") == []
    divided = """
    import os
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    a = DataLoader(ds, num_workers=os.cpu_count() // dist.get_world_size())
    b = DataLoader(ds, num_workers=min(8, os.cpu_count()))
    c = DataLoader(ds, num_workers=4)
    d = DataLoader(ds, num_workers=args.workers)
    e = DataLoader(ds, **kwargs)
    """
    assert codes(divided, "GL605") == []


def test_gl605_fix_divides_between_local_ranks_and_keeps_layout():
    source = """
    import os
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    loader = DataLoader(
        ds,
        num_workers=os.cpu_count(),  # all of them
        pin_memory=True,
    )
    """
    fixed = assert_fix_ok(source, "GL605")
    expected = textwrap.dedent(source).replace(
        "os.cpu_count(),", 'max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))),'
    )
    assert fixed == expected
