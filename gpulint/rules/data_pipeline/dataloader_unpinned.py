"""GL102 dataloader-unpinned."""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOADER_BUILT
from gpulint.linter.analysis.consumption import pipeline_consumed
from gpulint.linter.analysis.facts import ACCELERATOR, TORCH
from gpulint.linter.analysis.item_cost import TOKENIZES, UNKNOWN_COST_HINT
from gpulint.linter.analysis.nodes import dotted_name, is_false, keyword_arg, method_name, positional_args
from gpulint.linter.analysis.pytorch import is_dataloader
from gpulint.linter.analysis.walk import nodes_under
from gpulint.linter.analysis.workers import is_main_guard
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT

# Calls that ask whether the GPU is there; and, with the other accelerators', whether any is.
_GPU_TESTS = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
_AVAILABILITY_TESTS = _GPU_TESTS | {"torch.backends.mps.is_available", "torch.xpu.is_available"}
# Batches that travel by RPC are pickled into messages, and PyTorch/XLA's loaders (`MpDeviceLoader`)
# copy to a TPU their own way: where a batch starts in host memory does not decide how it reaches
# the device.
_NOT_PINNED_COPIES = ("torch.distributed.rpc", "torch_xla")
# Command-line switches that turn the accelerator off, or on (`--no-cuda` and `--no_cuda` alike).
_DEVICE_OFF_SWITCHES = frozenset({"cpu", "no_cuda", "no_accel", "no_gpu", "disable_cuda"})
_DEVICE_ON_SWITCHES = frozenset({"cuda", "accel", "gpu", "use_cuda"})
# What reading a batch's size looks like: `idx.numel()`, `idx.size(0)`, `idx.shape`.
_SIZE_ATTRIBUTES = frozenset({"numel", "size", "shape", "dim", "ndim"})
# A device string that names the GPU: "cuda", "cuda:0".
_CUDA_DEVICE = re.compile(r"cuda(:\d+)?")


class DataLoaderUnpinned(Rule):
    """
    ## What it finds
    A `DataLoader` without `pin_memory=True` (absent or `False`) in a module that trains on an
    accelerator, whose batches are decoded data: its dataset's items open or decode files
    (`PIL.Image.open`, `cv2.imread`, `torchaudio.load`, `np.load`, ...), or go through image
    transforms, or the dataset is one that decodes (`ImageFolder`, a torchvision dataset given a
    `transform=`).  The message names what an item does and where.

    Not over data already in memory (a `TensorDataset`, a tensor, a list of token ids or prompt
    strings, Lightning's `RandomDataset`, a pre-tokenized Hugging Face dataset: see GL101), nor
    for a loader never consumed, or only peeked at once; not in a module that runs on the CPU
    alone (`Trainer(accelerator="cpu")`, `device = torch.device("cpu")` and nothing naming an
    accelerator, or a step under CPU autocast -- `torch.cpu.amp.autocast()`, as Intel's `ipex`
    recipes do -- with no device named: pinning needs one), nor where batches travel by
    `torch.distributed.rpc` or to a TPU through PyTorch/XLA.  Nor where the batches never need
    pinning: they are indices that never reach the device (every loop over the loader reads its
    batch only to index other data, `x[idx]`, or to hand it to a sampler, `sampler.sample(idx)`),
    or the loader's dataset is a class of the module whose `__getitem__` moves each item to the
    accelerator (its batches are there already, and pinning a CUDA tensor raises).  Where the
    code shows no evidence of large batches -- a dataset built elsewhere, items tokenized into
    token ids, a run of a handful of batches, a loader Accelerate's `prepare()` wraps (it copies
    each batch without `non_blocking`, so pinning saves a millisecond against a step of
    hundreds) -- the finding is a hint: held back unless hints are shown (`--show-hints`, or the
    rule selected by its id).  The rule's other findings are held back by default too (most were
    right but not worth acting on), except where every item goes through transforms (image
    augmentation in `__getitem__`, a torchvision dataset given a `transform=`, `with_transform`):
    such findings were mostly wanted on whole repositories, and are shown (docs/precision.md).

    ## Why it is slow
    Copies from pageable host memory to the GPU go through a staging buffer and block the host;
    from pinned (page-locked) memory they run by DMA and can overlap compute when issued with
    `non_blocking=True` (GL104).  Host-to-device copy time typically drops by a third or more --
    which matters for batches of decoded images or audio (megabytes each), not for a batch of
    token ids (a few kilobytes: a millisecond at most).

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
    loader = DataLoader(train_set, batch_size=64, num_workers=4)
    model = Net().cuda()
    ```
    Use instead:
    ```python
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
    loader = DataLoader(train_set, batch_size=64, num_workers=4, pin_memory=True)
    model = Net().cuda()
    ```

    ## Fix (safe)
    Sets `pin_memory=`: pinning changes where batches live in host memory, not their values, so
    results are the same.  What it writes follows the script's own device choice, so that a run
    on a machine without a GPU does not warn "'pin_memory' argument is set as true but no
    accelerator is found":

    * the script's own flag, where one is in scope: a name given only a test of the accelerator
      (`use_cuda = not args.no_cuda and torch.cuda.is_available()`) -> `pin_memory=use_cuda`;
    * else the script's own command-line device option, where the parsed arguments are in scope
      (the name `parse_args()` is assigned to, or a parameter of that name): a `--cpu`,
      `--no-cuda` or `--no-accel` switch -> `pin_memory=not args.cpu`; a `--cuda`, `--accel` or
      `--gpu` switch -> `pin_memory=args.accel`; a `--device` value -> `pin_memory=args.device !=
      "cpu"`;
    * else, where the script always runs on the GPU -- a `.cuda()` call or a `"cuda"` device
      string under no condition (`torch.device("cuda")`, `device = "cuda"`; not a command line's
      default, which the user may change), and no question anywhere whether an accelerator is
      there -- `pin_memory=True`;
    * else `pin_memory=torch.cuda.is_available()`: the script asks whether an accelerator is there
      (`torch.cuda.is_available()`, `torch.accelerator.is_available()`,
      `torch.backends.mps.is_available()`), or its device comes from elsewhere (a trainer's
      `device`, a config's `MODEL.DEVICE`, `.cuda()` under `if args.gpu:`, a helper module that
      builds the loader for a script that decides), so it may run without a GPU.

    A `pin_memory=` given as a variable is left alone.
    """

    code = "GL102"
    name = "dataloader-unpinned"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot overlap compute"
    requires = {TORCH, ACCELERATOR}
    tokens = ("DataLoader",)
    triggers = ((LOADER_BUILT,),)  # what it reports: a DataLoader built
    site_triggers = 1  # (here: the module's own import table names the call a DataLoader)
    fix_applicability = Applicability.SAFE

    VALID = [
        # nothing to pin for: a CPU-only trainer, batches sent by RPC, token ids
        Valid(
            """
            import lightning as L
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms

            class Model(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    return self.net(batch[0]).sum()

            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            loader = DataLoader(train_set, batch_size=64, num_workers=4)
            L.Trainer(accelerator="cpu").fit(Model(), loader)
            """,
        ),
        Valid(
            """
            import torch.distributed.rpc as rpc
            from torchvision import datasets, transforms

            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            for x, y in DataLoader(train_set, batch_size=64, num_workers=4):
                rpc.rpc_sync("trainer", train_on_batch, args=(x, y))
            """,
            header=CUDA_SCRIPT,
        ),
        # the same at module level, the loaders handed to a function of the module that also reads
        # each batch's size
        Valid(
            """
            train_loader = DataLoader(train_idx, batch_size=16 * 1024, shuffle=True)
            test_loader = DataLoader(test_idx, batch_size=32 * 1024)

            def test(loader):
                total = 0
                for idx in loader:
                    out = model(data.x[idx].to(device))
                    total += idx.numel()
                return total

            for epoch in range(1, 201):
                for idx in train_loader:
                    model(data.x[idx].to(device)).sum().backward()
                print(test(train_loader), test(test_loader), len(train_loader))
            """,
            header=CUDA_SCRIPT,
        ),
        # a CPU trainer: Intel's bf16 recipe (`ipex.optimize`, CPU autocast) under Accelerate,
        # naming no device
        Valid(
            """
            import intel_extension_for_pytorch as ipex
            from accelerate import Accelerator
            from torchvision import datasets, transforms

            def main():
                accelerator = Accelerator()
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(images, batch_size=8, num_workers=2)
                model, optimizer = ipex.optimize(model, optimizer=optimizer, dtype=torch.bfloat16)
                for x, y in loader:
                    with torch.cpu.amp.autocast(enabled=True, dtype=torch.bfloat16):
                        loss = model(x, y)
                    accelerator.backward(loss)
            """,
            header="import torch\nfrom torch.utils.data import DataLoader\n",
        ),
        # a dataset whose `__getitem__` hands out CUDA tensors: its batches are on the GPU already
        Valid(
            """
            from PIL import Image
            from torchvision.transforms.functional import to_tensor

            class OnGpu(Dataset):
                def __init__(self, files):
                    self.files = files
                def __len__(self):
                    return len(self.files)
                def __getitem__(self, index):
                    return to_tensor(Image.open(self.files[index])).to(device)

            def main():
                for batch in DataLoader(OnGpu(files), batch_size=8):
                    model(batch).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        # batches of indices that only select host data or feed a sampler: never copied
        Valid(
            """
            def main():
                train_idx = split_idx["train"]
                loader = DataLoader(train_idx, batch_size=1024, shuffle=True, num_workers=2)
                for epoch in range(10):
                    for i, idx in enumerate(loader):
                        out = model(x[idx].to(device))
                        out.sum().backward()
                for nodes in DataLoader(train_idx, batch_size=1024, num_workers=2):
                    subgraph = neighbor_sampler.sample(nodes)
                    model(subgraph.to(device)).sum().backward()
            """,
            header=CUDA_SCRIPT,
        ),
        # pinned in the branch a conditional expression takes on the GPU
        Valid(
            """
            from torchvision import datasets, transforms

            use_cuda = torch.cuda.is_available()
            kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            for x, y in DataLoader(train_set, batch_size=64, **kwargs):
                step(x.to(device), y.to(device))
            """,
            header=CUDA_SCRIPT,
        ),
        # data in memory; a loader only peeked at once, one never used
        Valid(
            """
            from torch.utils.data import TensorDataset
            from lightning.pytorch.demos.boring_classes import RandomDataset
            a = DataLoader(TensorDataset(x, y), batch_size=32)
            b = DataLoader(RandomDataset(32, 64), batch_size=2)
            c = DataLoader(range(100), batch_size=8)
            def show():
                demo = DataLoader(images, batch_size=16)
                batch = next(iter(demo))
                unused = DataLoader(images, batch_size=16)
                return batch
            """,
            header=CUDA_SCRIPT,
        ),
        # CPU module
        Valid(
            """
            from torch.utils.data import DataLoader
            l = DataLoader(ds, num_workers=2)
            """,
        ),
        # pinned through a keyword dictionary that `.update()` completes
        Valid(
            """
            train_kwargs = {"batch_size": 64}
            if use_cuda:
                train_kwargs.update({"num_workers": 1, "pin_memory": True})
            loader = DataLoader(ds, **train_kwargs)
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # a loader Accelerate prepares: it copies without `non_blocking`, so pinning is a hint
        Invalid(
            """
            from accelerate import Accelerator
            from torchvision import datasets, transforms

            accelerator = Accelerator()
            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            loader = DataLoader(train_set, batch_size=4, num_workers=4)
            model, loader = accelerator.prepare(model, loader)
            for x, y in loader:
                accelerator.backward(model(x, y))
            """,
            "9:10",
            header=CUDA_SCRIPT,
            hints=("Accelerate's prepared loader copies each batch without `non_blocking`: pinning saves little",),
            fixed="""
            from accelerate import Accelerator
            from torchvision import datasets, transforms

            accelerator = Accelerator()
            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            loader = DataLoader(train_set, batch_size=4, num_workers=4, pin_memory=True)
            model, loader = accelerator.prepare(model, loader)
            for x, y in loader:
                accelerator.backward(model(x, y))
            """,
        ),
        # augmented images are shown by default although the rule is held back; files read per item
        # are held back with it (on whole repositories those were mostly not wanted)
        Invalid(
            """
            from torchvision import transforms
            from torchvision.datasets import CIFAR10, ImageFolder

            crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
            augmented = DataLoader(CIFAR10("data", transform=crop), batch_size=128)
            decoded = DataLoader(ImageFolder("data/val"), batch_size=128)
            for loader in (augmented, decoded):
                for x, y in loader:
                    step(x.to(device), y.to(device))
            """,
            "8:13",
            "9:11",
            header=CUDA_SCRIPT,
            hints=(None, MOSTLY_NOT_WANTED),
            fixed="""
            from torchvision import transforms
            from torchvision.datasets import CIFAR10, ImageFolder

            crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
            augmented = DataLoader(CIFAR10("data", transform=crop), batch_size=128, pin_memory=True)
            decoded = DataLoader(ImageFolder("data/val"), batch_size=128, pin_memory=True)
            for loader in (augmented, decoded):
                for x, y in loader:
                    step(x.to(device), y.to(device))
            """,
        ),
        # decoded images, named in the message; items tokenized into token ids are a hint
        Invalid(
            """
            import cv2
            from torch.utils.data import Dataset

            class Frames(Dataset):
                def __init__(self, files):
                    self.files = files
                def __getitem__(self, index):
                    return cv2.imread(self.files[index])

            for x in DataLoader(Frames(files), batch_size=32, num_workers=4):
                step(x.to(device))
            """,
            "13:10",
            header=CUDA_SCRIPT,
            messages=(
                "DataLoader without `pin_memory=True`: host-to-GPU copies are slower and cannot overlap compute; "
                "`__getitem__` decodes an image with `cv2.imread` (line 11), so its batches are decoded data, "
                "large to copy",
            ),
            fixed="""
            import cv2
            from torch.utils.data import Dataset

            class Frames(Dataset):
                def __init__(self, files):
                    self.files = files
                def __getitem__(self, index):
                    return cv2.imread(self.files[index])

            for x in DataLoader(Frames(files), batch_size=32, num_workers=4, pin_memory=True):
                step(x.to(device))
            """,
        ),
        Invalid(
            """
            from torch.utils.data import Dataset

            class Texts(Dataset):
                def __getitem__(self, index):
                    return self.tokenizer(self.texts[index])

            for x in DataLoader(Texts(), batch_size=32, num_workers=4):
                step(x.to(device))
            """,
            "10:10",
            header=CUDA_SCRIPT,
            hints=("its batches are token ids, small to copy",),
            fixed="""
            from torch.utils.data import Dataset

            class Texts(Dataset):
                def __getitem__(self, index):
                    return self.tokenizer(self.texts[index])

            for x in DataLoader(Texts(), batch_size=32, num_workers=4, pin_memory=True):
                step(x.to(device))
            """,
        ),
        # the dictionary a conditional expression picks on the GPU has no pin (the other branch's
        # would clash with a second one: no fix)
        Invalid(
            """
            from torchvision import datasets, transforms

            use_cuda = torch.cuda.is_available()
            kwargs = {"num_workers": 1} if use_cuda else {"pin_memory": False}
            train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            for x, y in DataLoader(train_set, batch_size=64, **kwargs):
                step(x.to(device), y.to(device))
            """,
            "9:13",
            header=CUDA_SCRIPT,
        ),
        # absent or False; a variable is the user's choice
        Invalid(
            """
            a = DataLoader(ds, num_workers=4)
            b = DataLoader(ds, num_workers=4, pin_memory=False)
            c = DataLoader(ds, num_workers=4, pin_memory=True)
            d = DataLoader(ds, num_workers=4, pin_memory=args.pin)
            """,
            "4:5",
            "5:5",
            hints=(UNKNOWN_COST_HINT,) * 2,
            header=CUDA_SCRIPT,
            fixed="""
            a = DataLoader(ds, num_workers=4, pin_memory=True)
            b = DataLoader(ds, num_workers=4, pin_memory=True)
            c = DataLoader(ds, num_workers=4, pin_memory=True)
            d = DataLoader(ds, num_workers=4, pin_memory=args.pin)
            """,
        ),
        # the device is a parameter (no `cuda` spelled: the script may run without a GPU, so the
        # pin follows whether one is there); the dictionary lacks the keyword
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader

            def evaluate(model, ds, device):
                options = {"batch_size": 100, "num_workers": 2}
                for x, y in DataLoader(ds, **options):
                    model(x.to(device))
            """,
            "6:17",
            hints=(UNKNOWN_COST_HINT,),
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def evaluate(model, ds, device):
                options = {"batch_size": 100, "num_workers": 2}
                for x, y in DataLoader(ds, **options, pin_memory=torch.cuda.is_available()):
                    model(x.to(device))
            """,
        ),
        # a helper module whose `.cuda()` runs only when asked (`if args.gpu:`), and an evaluation
        # on a trainer's device: neither always runs on a GPU, so no unconditional pin (PyTorch
        # warns on a CPU run); `torch` imported for the test
        Invalid(
            """
            from torch.utils.data import DataLoader

            def get_network(args):
                net = build(args.net)
                if args.gpu:
                    net = net.cuda()
                return net

            def get_training_dataloader(dataset, batch_size=16, num_workers=2):
                return DataLoader(dataset, shuffle=True, num_workers=num_workers, batch_size=batch_size)

            def eval_split(trainer, dataset):
                for x, y in DataLoader(dataset, batch_size=100, num_workers=2):
                    x = x.to(trainer.device)
            """,
            "10:12",
            "13:17",
            hints=(UNKNOWN_COST_HINT,) * 2,
            fixed="""
            import torch
            from torch.utils.data import DataLoader

            def get_network(args):
                net = build(args.net)
                if args.gpu:
                    net = net.cuda()
                return net

            def get_training_dataloader(dataset, batch_size=16, num_workers=2):
                return DataLoader(
                    dataset,
                    shuffle=True,
                    num_workers=num_workers,
                    batch_size=batch_size,
                    pin_memory=torch.cuda.is_available(),
                )

            def eval_split(trainer, dataset):
                for x, y in DataLoader(
                    dataset, batch_size=100, num_workers=2, pin_memory=torch.cuda.is_available()
                ):
                    x = x.to(trainer.device)
            """,
        ),
        # a script that can run without a GPU: its own flag where one is in scope (and set before the
        # loader), else the test
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            use_accel = torch.accelerator.is_available()
            class Config:
                use_cuda = torch.cuda.is_available()
            def main(args):
                use_cuda = not args.no_cuda and torch.cuda.is_available()
                train = DataLoader(ds, num_workers=2)
                train_model(train)
            def early(ds):
                loader = DataLoader(ds, num_workers=2)
                use_gpu = torch.cuda.is_available()
                return loader
            def evaluate(ds):
                return DataLoader(ds, num_workers=2)
            def other(ds):
                use_accel = args.accel
                return DataLoader(ds, num_workers=2)
            """,
            "8:13",
            "11:14",
            "15:12",
            "18:12",
            hints=(UNKNOWN_COST_HINT,) * 4,
            fixed="""
            import torch
            from torch.utils.data import DataLoader
            use_accel = torch.accelerator.is_available()
            class Config:
                use_cuda = torch.cuda.is_available()
            def main(args):
                use_cuda = not args.no_cuda and torch.cuda.is_available()
                train = DataLoader(ds, num_workers=2, pin_memory=use_cuda)
                train_model(train)
            def early(ds):
                loader = DataLoader(ds, num_workers=2, pin_memory=use_accel)
                use_gpu = torch.cuda.is_available()
                return loader
            def evaluate(ds):
                return DataLoader(ds, num_workers=2, pin_memory=use_accel)
            def other(ds):
                use_accel = args.accel
                return DataLoader(ds, num_workers=2, pin_memory=torch.cuda.is_available())
            """,
        ),
        # the script's own command-line device option, where the parsed arguments are in scope
        Invalid(
            """
            import argparse
            from torchvision import datasets, transforms

            def build(args, ds):
                return DataLoader(ds, batch_size=8, num_workers=2)

            def main():
                parser = argparse.ArgumentParser()
                parser.add_argument("--no-accel", action="store_true")
                args = parser.parse_args()
                device = torch.device("cuda" if not args.no_accel else "cpu")
                ds = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                for x in build(args, ds):
                    step(x.to(device))
            """,
            "8:12",
            fixed="""
            import argparse
            from torchvision import datasets, transforms

            def build(args, ds):
                return DataLoader(ds, batch_size=8, num_workers=2, pin_memory=not args.no_accel)

            def main():
                parser = argparse.ArgumentParser()
                parser.add_argument("--no-accel", action="store_true")
                args = parser.parse_args()
                device = torch.device("cuda" if not args.no_accel else "cpu")
                ds = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                for x in build(args, ds):
                    step(x.to(device))
            """,
            header=CUDA_SCRIPT,
        ),
        Invalid(
            """
            import argparse
            from torchvision import datasets, transforms

            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            args = parser.parse_args()
            ds = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            for x in DataLoader(ds, batch_size=8, num_workers=2):
                step(x.to(args.device))
            """,
            "11:10",
            fixed="""
            import argparse
            from torchvision import datasets, transforms

            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            args = parser.parse_args()
            ds = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
            for x in DataLoader(ds, batch_size=8, num_workers=2, pin_memory=args.device != "cpu"):
                step(x.to(args.device))
            """,
            header=CUDA_SCRIPT,
        ),
        # the fix keeps a multi-line layout
        Invalid(
            """
            loader = DataLoader(  # comment kept
                ds,
                batch_size=32,
                num_workers=4,
            )
            """,
            "4:10",
            hints=(UNKNOWN_COST_HINT,),
            header=CUDA_SCRIPT,
            fixed="""
            loader = DataLoader(  # comment kept
                ds,
                batch_size=32,
                num_workers=4,
                pin_memory=True,
            )
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or not pipeline_consumed(self.ctx, node):
            return
        keywords = self.ctx.values.keywords_of(node)
        if keywords is None:
            return  # `**options` this module does not show
        pin = keywords.get("pin_memory")
        if pin is not None and not is_false(pin):
            return
        if len(positional_args(node)) >= 8:
            return  # pin_memory given positionally (8th parameter)
        if self.ctx.loaders.cpu_only or self.ctx.uses(*_NOT_PINNED_COPIES):
            return  # nothing to copy to: pinning needs a CUDA device (RPC and XLA copy batches their own way)
        verdict = self.ctx.loaders.verdict(node)
        if verdict.no_cost:
            return  # batches indexed from memory: no workers, little to gain from pinning
        if self._batches_only_index(node):
            return  # index batches that select host data or feed a sampler: never copied to the device
        if self.ctx.loaders.items_on_device(node):
            return  # batches already on the device: nothing to pin (and pinning a CUDA tensor raises)
        fix = None
        in_a_dictionary = "pin_memory" in (self.ctx.values.keywords_of(node, every_branch=True) or {})
        if keyword_arg(node, "pin_memory") is not None or not in_a_dictionary:  # (a second one would clash)
            value, imports = self._pin_value(node)
            fix = set_keyword(
                self.ctx,
                node,
                "pin_memory",
                value,
                Applicability.SAFE,
                f"Pin host memory: `pin_memory={value}`",
                imports,
            )
        hint = verdict.hint
        if verdict.kind == TOKENIZES and hint is None:
            hint = "its batches are token ids, small to copy"
        elif hint is None and self.ctx.loaders.prepared_by_accelerate(node):
            hint = "Accelerate's prepared loader copies each batch without `non_blocking`: pinning saves little"
        message = self.message
        if verdict.evidence and verdict.kind != TOKENIZES:
            message += f"; {verdict.evidence}, so its batches are decoded data, large to copy"
        self.report_with_evidence(node, verdict.kind, message=message, fix=fix, hint=hint)

    def _batches_only_index(self, call: cst.Call) -> bool:
        """Whether the loader's batches are indices that never reach the device: every loop over it
        (`for idx in DataLoader(train_idx, ...)`, also through the name it is assigned to or
        `enumerate`) reads its batch only to index other data (`x[idx]`) or to hand it to a
        sampler (`sampler.sample(idx)`)."""
        loops = self._loops_over(call)
        if not loops:
            return False
        for loop, batch in loops:
            reads = [
                node
                for node in nodes_under(loop.body)
                if isinstance(node, cst.Name) and node.value == batch and self._reads_variable(node)
            ]
            if not reads or not all(self._indexes_or_samples(read) for read in reads):
                return False
        return True

    def _loops_over(self, call: cst.Call) -> list[tuple[cst.For, str]]:
        """The `for` loops over the loader and the name each gives its batch (empty where any loop
        over it unpacks its batches, or the loader is read in another way)."""
        parent = self.ctx.parent(call)
        if isinstance(parent, cst.For) and parent.iter is call:
            return [(parent, parent.target.value)] if isinstance(parent.target, cst.Name) else []
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return []
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return []
        function = self.ctx.enclosing_function(call)
        # (a module-level loader is read in the functions of the module: `for idx in train_loader`)
        scope = function.body if function is not None else self.ctx.module
        return self._loops_over_name(scope, target, depth=2) or []

    def _loops_over_name(self, scope: cst.CSTNode, variable: cst.Name, depth: int) -> list[tuple[cst.For, str]] | None:
        """The loops over `variable` in `scope` (also through `enumerate`, and through a function
        of the module it is handed to: `test(train_loader)` then `for idx in loader`); `len()` of
        it aside, None where it is read in any other way."""
        loops: list[tuple[cst.For, str]] = []
        for node in nodes_under(scope):
            if not isinstance(node, cst.Name) or node.value != variable.value or node is variable:
                continue
            if not self._reads_variable(node):
                continue
            loop = self.ctx.parent(node)
            if isinstance(loop, cst.Arg) and isinstance(call_node := self.ctx.parent(loop), cst.Call):
                callee = dotted_name(call_node.func)
                if callee == "len":
                    continue
                if callee == "enumerate" and isinstance(outer := self.ctx.parent(call_node), cst.For):
                    element = outer.target
                    if not isinstance(element, cst.Tuple) or len(element.elements) != 2:
                        return None
                    batch = element.elements[1].value
                    if not isinstance(batch, cst.Name):
                        return None
                    loops.append((outer, batch.value))
                    continue
                handed = self._parameter_for(call_node, loop) if depth > 0 else None
                if handed is None:
                    return None
                function, parameter = handed
                found = self._loops_over_name(function.body, parameter, depth - 1)
                if found is None:
                    return None
                loops.extend(found)
            elif isinstance(loop, cst.For) and loop.iter is node and isinstance(loop.target, cst.Name):
                loops.append((loop, loop.target.value))
            else:
                return None
        return loops

    def _parameter_for(self, call: cst.Call, argument: cst.Arg) -> tuple[cst.FunctionDef, cst.Name] | None:
        """The function of the module `call` calls, and its parameter that `argument` (positional) binds."""
        if argument.keyword is not None or argument.star:
            return None
        name = dotted_name(call.func)
        functions = [f for f in self.ctx.index.nodes("FunctionDef") if f.name.value == name]
        if len(functions) != 1:
            return None
        position = positional_args(call).index(argument)
        params = functions[0].params.params
        return (functions[0], params[position].name) if position < len(params) else None

    def _reads_variable(self, name: cst.Name) -> bool:
        parent = self.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        return not (isinstance(parent, cst.Arg) and parent.keyword is name)

    def _indexes_or_samples(self, name: cst.Name) -> bool:
        """`x[idx]` (the whole index), an argument of a sampler's method (`sampler.sample(idx)`), or
        a look at its size (`idx.numel()`, `len(idx)`)."""
        parent = self.ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.value is name:
            return parent.attr.value in _SIZE_ATTRIBUTES
        if isinstance(parent, cst.Index) and isinstance(self.ctx.parent(parent), cst.SubscriptElement):
            return True
        if isinstance(parent, cst.Arg) and isinstance(call := self.ctx.parent(parent), cst.Call):
            callee = dotted_name(call.func) or ""
            return callee == "len" or "sampl" in callee.lower()
        return False

    def _pin_value(self, call: cst.Call) -> tuple[str, tuple[str, ...]]:
        """What the fix writes as `pin_memory=` (see the docs), and the imports it needs."""
        flag = self._accelerator_flag(call) or self._device_option(call)
        if flag is not None:
            return flag, ()
        if self._always_on_gpu and not self._may_run_without_accelerator:
            return "True", ()
        text, imports = self.ctx.reference("torch.cuda.is_available")
        return f"{text}()", imports

    @cached_property
    def _always_on_gpu(self) -> bool:
        """Whether the module moves work to the GPU on every path: a `.cuda()` call or a `"cuda"`
        device string under no condition (the `__main__` guard aside).  Where the device comes
        from elsewhere (`trainer.device`, a config's `MODEL.DEVICE`, `.cuda()` under `if
        args.gpu:`), the script may run without one."""
        places: list[cst.CSTNode] = [call for call in self.ctx.index.nodes("Call") if method_name(call) == "cuda"]
        places += [
            string
            for string in self.ctx.index.nodes("SimpleString")
            if isinstance(string.evaluated_value, str)
            and _CUDA_DEVICE.fullmatch(string.evaluated_value)
            and self._used_as_device(string)
        ]
        return any(self._unconditional(place) for place in places)

    def _used_as_device(self, string: cst.SimpleString) -> bool:
        """`device = "cuda"`, `torch.device("cuda")`, `.to("cuda")`, `device="cuda"` -- not an
        argument of other calls, such as a command line's default (`add_argument("--device",
        default="cuda")`), which the user may change."""
        argument = self.ctx.parent(string)
        if not isinstance(argument, cst.Arg):
            return True
        call = self.ctx.parent(argument)
        if not isinstance(call, cst.Call):
            return False
        if argument.keyword is not None:
            return argument.keyword.value == "device"
        return self.ctx.call_qualified_name(call) == "torch.device" or method_name(call) == "to"

    def _unconditional(self, node: cst.CSTNode) -> bool:
        return not any(
            isinstance(ancestor, (cst.If, cst.IfExp, cst.Try)) and not is_main_guard(ancestor)
            for ancestor in self.ctx.ancestors(node)
        )

    @cached_property
    def _may_run_without_accelerator(self) -> bool:
        """Whether the module asks anywhere whether an accelerator is there."""
        return any(self.ctx.call_qualified_name(call) in _AVAILABILITY_TESTS for call in self.ctx.index.nodes("Call"))

    @cached_property
    def _flags(self) -> dict[tuple[int, str], tuple[bool, cst.Assign]]:
        """For each (id of a function, or 0 for the module; name) assigned there: whether every
        value it is given there tests that the GPU is there (`use_cuda = not args.no_cuda and
        torch.cuda.is_available()`), and its first assignment."""
        flags: dict[tuple[int, str], tuple[bool, cst.Assign]] = {}
        for assign in self.ctx.index.nodes("Assign"):
            scope = next(
                (a for a in self.ctx.ancestors(assign) if isinstance(a, (cst.FunctionDef, cst.ClassDef))), None
            )
            if isinstance(scope, cst.ClassDef):
                continue  # a class attribute: not a name a function can read
            for target in assign.targets:
                if isinstance(target.target, cst.Name):
                    function = self.ctx.enclosing_function(assign)
                    key = (id(function) if function is not None else 0, target.target.value)
                    is_flag, first = flags.get(key, (True, assign))
                    flags[key] = (is_flag and self._tests_gpu(assign.value), first)
        return flags

    def _accelerator_flag(self, call: cst.Call) -> str | None:
        """The first such flag in scope at `call`: assigned in its function before it, else at
        module level (before it, when the call is at module level too) and not a local name of
        the function."""
        function = self.ctx.enclosing_function(call)
        own_scope = id(function) if function is not None else 0
        shadowed: set[str] = set()
        if function is not None:
            shadowed = {name for (scope, name) in self._flags if scope == own_scope}
            shadowed |= {param.name.value for param in nodes_under(function.params) if isinstance(param, cst.Param)}
        candidates = [
            (scope, name, first)
            for (scope, name), (is_flag, first) in self._flags.items()
            if is_flag and (scope == own_scope or (scope == 0 and name not in shadowed))
        ]
        if not candidates:
            return None
        candidates.sort(key=lambda candidate: candidate[0] != own_scope)  # the call's own scope first
        positions = self.ctx.positions([call, *(first for _, _, first in candidates)])
        for scope, name, first in candidates:
            # A flag of the call's own scope assigned only after the call is not set yet there.
            if scope != own_scope or positions[first].start.line < positions[call].start.line:
                return name
        return None

    @cached_property
    def _device_options(self) -> list[str]:
        """The script's command-line device choice: for each `add_argument` of a device option
        (`--cpu`, `--no_cuda`, `--no-accel`, `--accel`, `--cuda` switches, a `--device` value), the
        test of the GPU it makes, with `{}` where the parsed command line's name goes."""
        found: list[str] = []
        for option in self.ctx.command_line:
            names = {flag.lstrip("-").replace("-", "_") for flag in option.flags}
            switch = option.action == "store_true"
            if "device" in names:
                found.append(f'{{}}.{option.dest} != "cpu"')
            elif switch and names & _DEVICE_OFF_SWITCHES:
                found.append(f"not {{}}.{option.dest}")
            elif switch and names & _DEVICE_ON_SWITCHES:
                found.append(f"{{}}.{option.dest}")
        return found

    @cached_property
    def _parsed_arguments(self) -> dict[int, str]:
        """For each scope (id of a function, or 0 for the module), the name it gives the parsed
        command line (`args = parser.parse_args()`)."""
        names: dict[int, str] = {}
        for assign, name in self.ctx.parsed_arguments:
            function = self.ctx.enclosing_function(assign)
            names.setdefault(id(function) if function is not None else 0, name)
        return names

    def _device_option(self, call: cst.Call) -> str | None:
        """`pin_memory=` from the script's own device option, where the parsed command line is in
        scope at `call` under the name the script parses it to (a parameter of that name counts):
        `not args.cpu`, `args.device != "cpu"`."""
        if not self._device_options or not self._parsed_arguments:
            return None
        function = self.ctx.enclosing_function(call)
        own_scope = id(function) if function is not None else 0
        in_scope: set[str] = set()
        if own_scope in self._parsed_arguments:
            in_scope = {self._parsed_arguments[own_scope]}
        elif function is not None:
            params = {param.name.value for param in nodes_under(function.params) if isinstance(param, cst.Param)}
            in_scope = params & set(self._parsed_arguments.values())
            if not in_scope and 0 in self._parsed_arguments and self._parsed_arguments[0] not in params:
                in_scope = {self._parsed_arguments[0]}
        if len(in_scope) != 1:
            return None
        namespace = in_scope.pop()
        text = self._device_options[0]
        return text.format(namespace)

    def _tests_gpu(self, value: cst.BaseExpression) -> bool:
        """`torch.cuda.is_available()` (or `torch.accelerator.is_available()`), alone or joined to
        other conditions by `and`: true only where the GPU is there."""
        if isinstance(value, cst.BooleanOperation):
            return isinstance(value.operator, cst.And) and (self._tests_gpu(value.left) or self._tests_gpu(value.right))
        return isinstance(value, cst.Call) and self.ctx.call_qualified_name(value) in _GPU_TESTS
