"""GL101 dataloader-serial."""

from __future__ import annotations

import libcst as cst

from gpulint.linter.analysis.code_shapes import LOADER_BUILT
from gpulint.linter.analysis.consumption import fetches_one_batch, pipeline_consumed
from gpulint.linter.analysis.facts import ACCELERATOR, ONE_PROCESS_PER_GPU, TORCH
from gpulint.linter.analysis.item_cost import UNKNOWN_COST_HINT
from gpulint.linter.analysis.nodes import is_zero, keyword_arg, positional_args
from gpulint.linter.analysis.pytorch import dataloader_dataset, is_dataloader
from gpulint.linter.findings import Applicability
from gpulint.linter.fix.builders import set_keyword
from gpulint.linter.rule import MOSTLY_NOT_WANTED, Invalid, Rule, Valid
from gpulint.rules.case_headers import CUDA_SCRIPT
from gpulint.rules.options import (
    LOCAL_RANKS_DEEPSPEED,
    LOCAL_RANKS_SPAWN,
    LOCAL_RANKS_TORCHRUN,
    NUM_WORKERS,
    cores_per_rank,
)

ITERABLE_MESSAGE = (
    "DataLoader over an IterableDataset loads batches in the training process; no fix: the dataset does not split its "
    "items with `get_worker_info()`, so every worker would yield every item"
)

# `mp.spawn` and the call under it: they start the ranks without telling them how many share the node.
_SPAWNS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})

# What the message adds where the call itself sets `num_workers=0`.
EXPLICIT_ZERO_NOTE = " (no fix: the call sets `num_workers=0` itself, a value chosen on purpose)"

# In a module that names no accelerator, what is true of the script: the step waits, not a GPU.
_HOST_MESSAGE = "DataLoader loads batches in the training process (no `num_workers`): each step waits for its batch"


class DataLoaderSerial(Rule):
    """
    ## What it finds
    A `torch.utils.data.DataLoader` created without `num_workers`, or with `num_workers=0` (also
    through a `**kwargs` dictionary built in the module, or one a conditional expression picks:
    `{"num_workers": 1} if use_cuda else {}`), whose items cost real work to load: its dataset's
    `__getitem__` (or `__iter__`) opens or decodes a file (`open`, `PIL.Image.open`, `cv2.imread`,
    `torchvision.io.read_image`, `torchaudio.load`, `np.load`, `h5py.File`, ...), applies image
    transforms or tokenizes each item, or the dataset is one that decodes its files
    (`ImageFolder`, a torchvision dataset given a `transform=`, a Hugging Face dataset with
    `with_transform`).  The message names what an item does and where.  The rule is about the
    host: it applies whether or not the module names an accelerator.

    ## Why it is slow
    With no workers, every batch is read, decoded and collated in the training process, between
    two steps, while the GPU waits.  A loader whose per-batch work takes as long as the step halves
    throughput; the PyTorch profiler's TensorBoard plugin flags DataLoader time above 5% of a step.
    Workers prepare the next batches in parallel with compute.

    A loader over data already in memory -- a `TensorDataset`, a tensor, a list or `range` (of
    token ids, of prompt strings), Lightning's `RandomDataset` / `WikiText2`, a dataset class (of
    the module, or of another module of the project) whose `__getitem__` only indexes what it
    holds, a Hugging Face dataset without a per-item transform (its `.map()` tokenized it before
    training) -- is not reported: indexing memory is cheaper than handing batches between
    processes.  Nor is a loader never consumed, or only peeked at once (`next(iter(loader))` in a
    demo), in the function that builds it.  In a module that names no accelerator, or runs on the
    CPU alone (`Trainer(accelerator="cpu")`, `device = "cpu"`), the message says what is true
    there: each step waits for its batch.

    Where the code shows no evidence of a cost -- the dataset is built in another module or handed
    in as a parameter, its items are small images held in memory only converted to tensors (MNIST
    or CIFAR with `ToTensor()` and `Normalize()`), or the run loads a handful of batches
    (`max_steps=10`, `limit_train_batches=15`, `if i == 15: break` in the loop over the loader) --
    the finding is a hint: held back unless hints are shown (`--show-hints`, or the rule selected
    by its id).  The rule's other findings are held back by default too (most were right but not
    worth acting on), except where every item goes through transforms (image augmentation in
    `__getitem__`, a torchvision dataset given a `transform=`, `with_transform`): such findings
    were mostly wanted on whole repositories, and are shown (docs/precision.md).  Files read or
    items tokenized per item were not, and stay held.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    def main():
        train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net().cuda()
        train(model, loader)

    if __name__ == "__main__":
        main()
    ```
    Use instead:
    ```python
    import os

    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    def main():
        train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
        loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=min(8, os.cpu_count() or 1))
        model = Net().cuda()
        train(model, loader)

    if __name__ == "__main__":
        main()
    ```

    ## Fix (unsafe)
    Sets `num_workers=` to the `num-workers` expression (default `min(8, os.cpu_count() or 1)`) and
    imports `os` when the expression uses it.  Unsafe: with workers, the dataset is copied into
    other processes, so it must be picklable, and per-worker random state and open file handles
    behave differently.

    A `num_workers=0` written in the call is a value its author chose -- an evaluation loader over
    cheap synthetic data, a run kept in one process to debug it -- and is reported with no fix (the
    message says so), as an explicit trainer argument is: set the workers yourself where they pay.

    In a module that runs one process per GPU (it uses `torch.distributed` -- `init_process_group`,
    `DistributedDataParallel`, `DistributedSampler` -- or Accelerate: what `torchrun`, `accelerate
    launch` and `mp.spawn` scripts do), every rank starts its own workers, and the default would
    give each rank the whole node (GL605).  There the default divides the node's cores among its
    ranks: `min(8, max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))`,
    the number of ranks on the node read the way the script's launcher tells it: `torchrun` and
    `accelerate launch` set `LOCAL_WORLD_SIZE`; in a module that uses DeepSpeed, whose `deepspeed`
    launcher sets `LOCAL_SIZE` instead, `int(os.environ.get("LOCAL_SIZE", "1"))`; in a script that
    starts its ranks with `mp.spawn` (which sets neither), one rank per GPU of the node,
    `max(1, torch.cuda.device_count())`.  Where the variable is unset, one rank per node is
    assumed.  A `num-workers` the project sets is written as it is.

    The fix is offered only where workers can start under every start method: the loader is built
    under `if __name__ == "__main__":`, or in a function or class reached from there.  Under
    `spawn` (the default on macOS and Windows) and `forkserver` (Linux, from Python 3.14) each
    worker imports the main module again; training code at module level, as in many tutorials,
    then runs again inside the worker, and the worker it starts fails with "An attempt has been
    made to start a new process before the current process has finished its bootstrapping phase".
    There the finding has no fix: move the training code into a `main()` called under the guard
    first.  Nor is there one when the loader hands its workers a lambda, or a function or class
    defined inside a function, directly or in what its dataset was built from
    (`transforms.Lambda(lambda x: x.mul(255))` in the transforms), or what a function of the
    module returns that is one (`collate_fn=make_collate(tokenizer)` where `make_collate` returns
    its nested `collate`): under `spawn` they cannot be pickled into a worker ("Can't pickle local
    object").  Nor where the loader's dataset is a class of the module whose `__getitem__` moves
    each item to the GPU (`.cuda()`, `.to(device)`): a forked worker cannot initialize CUDA
    ("Cannot re-initialize CUDA in forked subprocess").  The message says which of these keeps the
    fix away.

    A loader built to fetch a single batch, `next(iter(DataLoader(...)))` (a callback that logs
    sample images), is not reported: workers would start, hand over one batch and stop.

    A loader over an `IterableDataset` of the module that does not split its items between workers
    (`torch.utils.data.get_worker_info()` in the dataset, or a `worker_init_fn`) is reported with
    that reason and no fix: every worker would yield every item, so each batch would arrive once
    per worker.
    """

    code = "GL101"
    name = "dataloader-serial"
    hint_by_default = MOSTLY_NOT_WANTED
    message = "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch"
    requires = {TORCH}
    tokens = ("DataLoader",)
    triggers = ((LOADER_BUILT,),)  # what it reports: a DataLoader built
    site_triggers = 1  # (here: the module's own import table names the call a DataLoader)
    fix_applicability = Applicability.UNSAFE
    options = (NUM_WORKERS,)

    VALID = [
        # a dataset whose items are what it holds (a prompt string and the index); Hugging Face
        # splits tokenized by `.map()` before training, followed through the names that hold them
        Valid(
            """
            from datasets import load_dataset
            from transformers import default_data_collator
            from torch.utils.data import Dataset

            class PromptDataset(Dataset):
                def __init__(self, prompt, count):
                    self.prompt = prompt
                    self.count = count
                def __len__(self):
                    return self.count
                def __getitem__(self, index):
                    return {"prompt": self.prompt, "index": index}

            def main():
                prompts = DataLoader(PromptDataset("a photo of a dog", 200), batch_size=4)
                raw = load_dataset("glue", "mrpc")
                processed = raw.map(tokenize, batched=True)
                train = DataLoader(processed["train"], batch_size=8, collate_fn=default_data_collator)
                for loader in (prompts, train):
                    for batch in loader:
                        step(batch)

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # items indexed from memory: token ids collated by the tokenizer, prompt strings, a
        # pre-tokenized Hugging Face dataset with a padding collator
        Valid(
            """
            from datasets import load_dataset
            from transformers import DataCollatorWithPadding
            from torch.utils.data import Dataset

            class TokenIds(Dataset):
                def __init__(self, ids):
                    self.ids = ids
                def __len__(self):
                    return len(self.ids)
                def __getitem__(self, index):
                    return {"input_ids": torch.tensor(self.ids[index])}

            def main():
                ids = DataLoader(TokenIds(encoded), batch_size=8, collate_fn=tokenizer.pad)
                prompts = DataLoader(["Tell me a joke", "Summarize this"], batch_size=2)
                data = load_dataset("imdb")["train"].map(tokenize, batched=True)
                hf = DataLoader(data, batch_size=8, collate_fn=DataCollatorWithPadding(tokenizer))
                for loader in (ids, prompts, hf):
                    for batch in loader:
                        step(batch)

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # workers set in the branch a conditional expression takes on the GPU
        Valid(
            """
            from torchvision import datasets, transforms

            def main():
                use_cuda = torch.cuda.is_available()
                kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
                train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64, **kwargs)
                for x, y in loader:
                    step(x.to(device), y.to(device))

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # workers set through a keyword dictionary built in the module
        Valid(
            """
            from torch.utils.data import DataLoader
            train_kwargs = {"batch_size": 64}
            cuda_kwargs = {"num_workers": 2, "pin_memory": True}
            train_kwargs.update(cuda_kwargs)
            loader = DataLoader(ds, **train_kwargs)
            """,
        ),
        # tensors already in memory
        Valid(
            """
            from torch.utils.data import TensorDataset
            ds = TensorDataset(x, y)
            loader = DataLoader(ds, batch_size=32)
            """,
            header=CUDA_SCRIPT,
        ),
        # data in memory: tensors, lists, `range`, Lightning's demo datasets, a dataset of tensors
        Valid(
            """
            from lightning.pytorch.demos import WikiText2
            from lightning.pytorch.demos.boring_classes import RandomDataset

            class Tokens(Dataset):
                def __init__(self, n):
                    self.data = torch.randint(0, 100, (n, 128))
                def __getitem__(self, index):
                    return self.data[index], self.data[index]

            a = DataLoader(RandomDataset(32, 64), batch_size=2)
            b = DataLoader(range(100), batch_size=8)
            c = DataLoader(torch.randn(100, 3), batch_size=8)
            d = DataLoader(WikiText2(), batch_size=20)
            e = DataLoader(Tokens(1000), batch_size=20)
            samples = [encode(t) for t in texts]
            f = DataLoader(samples, batch_size=8)
            """,
            header=CUDA_SCRIPT,
        ),
        # under torchrun: a dataset class holding a list of (tensor, tensor) pairs, handed to a
        # function that builds the loader (its parameter annotated `Dataset`)
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader, Dataset
            from torch.utils.data.distributed import DistributedSampler
            from torch.distributed import init_process_group

            class MyTrainDataset(Dataset):
                def __init__(self, size):
                    self.size = size
                    self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]
                def __len__(self):
                    return self.size
                def __getitem__(self, index):
                    return self.data[index]

            def prepare_dataloader(dataset: Dataset, batch_size: int):
                return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))

            def main():
                init_process_group(backend="nccl")
                train(prepare_dataloader(MyTrainDataset(2048), 32))

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # a loader never consumed, or peeked at once in a demo
        Valid(
            """
            def show():
                demo = DataLoader(images, batch_size=16)
                batch = next(iter(demo))
                print(len(demo))
                unused = DataLoader(images, batch_size=16)
                return batch
            """,
            header=CUDA_SCRIPT,
        ),
        # a loader built to fetch one batch (a callback logging sample images): workers would start,
        # hand it over and stop
        Valid(
            """
            from torchvision import datasets, transforms

            class SampleImages(Callback):
                def on_validation_epoch_end(self, trainer, module):
                    images = datasets.ImageFolder("data/val", transform=transforms.ToTensor())
                    batch = next(iter(DataLoader(images, batch_size=16, shuffle=True)))
                    trainer.logger.log_image("samples", batch[0])

            def main():
                Trainer(callbacks=[SampleImages()]).fit(Model())

            if __name__ == "__main__":
                main()
            """,
            header=CUDA_SCRIPT,
        ),
        # text in comments and strings
        Valid(
            """
            # loader = DataLoader(ds)
            doc = "DataLoader(ds) without workers"
            """,
            header=CUDA_SCRIPT,
        ),
    ]
    INVALID = [
        # evidence of a cost, named in the message: an image decoded per item (in a method
        # `__getitem__` calls), a tokenizer called per item, a `collate_fn` that tokenizes
        Invalid(
            """
            from PIL import Image
            from torch.utils.data import Dataset

            class Images(Dataset):
                def __init__(self, files):
                    self.files = files
                def __getitem__(self, index):
                    return self.load(self.files[index])
                def load(self, path):
                    return Image.open(path).convert("RGB")

            class Texts(Dataset):
                def __getitem__(self, index):
                    return self.tokenizer(self.texts[index], truncation=True)

            def collate(batch):
                return tokenizer(batch, padding=True, return_tensors="pt")

            def main():
                images = DataLoader(Images(files), batch_size=32)
                texts = DataLoader(Texts(), batch_size=32)
                raw = DataLoader(["a b", "c d"], batch_size=2, collate_fn=collate)
                for loader in (images, texts, raw):
                    for batch in loader:
                        step(batch)

            if __name__ == "__main__":
                main()
            """,
            "23:14",
            "24:13",
            "25:11",
            header=CUDA_SCRIPT,
            options={"num-workers": "4"},
            messages=(
                "DataLoader loads batches in the training process: `__getitem__` decodes an image with "
                "`PIL.Image.open` (line 13); the GPU waits for every batch (set `num_workers`)",
                "DataLoader loads batches in the training process: `__getitem__` tokenizes with `self.tokenizer` "
                "(line 17); the GPU waits for every batch (set `num_workers`)",
                "DataLoader loads batches in the training process: `collate_fn` tokenizes with `tokenizer` "
                "(line 20); the GPU waits for every batch (set `num_workers`)",
            ),
            fixed="""
            from PIL import Image
            from torch.utils.data import Dataset

            class Images(Dataset):
                def __init__(self, files):
                    self.files = files
                def __getitem__(self, index):
                    return self.load(self.files[index])
                def load(self, path):
                    return Image.open(path).convert("RGB")

            class Texts(Dataset):
                def __getitem__(self, index):
                    return self.tokenizer(self.texts[index], truncation=True)

            def collate(batch):
                return tokenizer(batch, padding=True, return_tensors="pt")

            def main():
                images = DataLoader(Images(files), batch_size=32, num_workers=4)
                texts = DataLoader(Texts(), batch_size=32, num_workers=4)
                raw = DataLoader(["a b", "c d"], batch_size=2, collate_fn=collate, num_workers=4)
                for loader in (images, texts, raw):
                    for batch in loader:
                        step(batch)

            if __name__ == "__main__":
                main()
            """,
        ),
        # a trainer on the CPU alone: no GPU is said to wait; a keyword dictionary whose GPU branch
        # has no workers
        Invalid(
            """
            import lightning as L
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms

            def main():
                train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64)
                L.Trainer(accelerator="cpu", max_epochs=3).fit(Model(), loader)

            if __name__ == "__main__":
                main()
            """,
            "7:14",
            options={"num-workers": "4"},
            messages=(
                "DataLoader loads batches in the training process: `ImageFolder` decodes a file for every item "
                "(line 6); each step waits for its batch (set `num_workers`)",
            ),
            fixed="""
            import lightning as L
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms

            def main():
                train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64, num_workers=4)
                L.Trainer(accelerator="cpu", max_epochs=3).fit(Model(), loader)

            if __name__ == "__main__":
                main()
            """,
        ),
        # (no fix: the other branch passes `num_workers`, which a second one would clash with)
        Invalid(
            """
            from torchvision import datasets, transforms

            def main():
                use_cuda = torch.cuda.is_available()
                kwargs = {"pin_memory": True} if use_cuda else {"num_workers": 2}
                train_set = datasets.MNIST("data", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64, **kwargs)
                for x, y in loader:
                    step(x.to(device), y.to(device))

            if __name__ == "__main__":
                main()
            """,
            "10:14",
            header=CUDA_SCRIPT,
        ),
        # small images held in memory, only converted to tensors: a hint (augmenting them is work)
        Invalid(
            """
            from torchvision import datasets, transforms

            def main():
                convert = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
                plain = DataLoader(datasets.CIFAR100("data", transform=convert), batch_size=64, num_workers=0)
                crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
                augmented = DataLoader(datasets.CIFAR100("data", transform=crop), batch_size=64, num_workers=0)
                for loader in (plain, augmented):
                    for x, y in loader:
                        step(x.to(device), y.to(device))

            if __name__ == "__main__":
                main()
            """,
            "8:13",
            "10:17",
            header=CUDA_SCRIPT,
            hints=("its items are small images held in memory, only converted to tensors", None),
        ),
        # augmented items are shown by default although the rule is held back; files read per item
        # are held back with it (on whole repositories those were mostly not wanted)
        Invalid(
            """
            import numpy as np
            from torch.utils.data import Dataset
            from torchvision import transforms
            from torchvision.datasets import CIFAR10

            class Arrays(Dataset):
                def __init__(self, files):
                    self.files = files
                def __len__(self):
                    return len(self.files)
                def __getitem__(self, index):
                    return np.load(self.files[index])

            def main():
                crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
                aug = DataLoader(CIFAR10("data", transform=crop), batch_size=64)
                arrays = DataLoader(Arrays(files), batch_size=64)
                for loader in (aug, arrays):
                    for x in loader:
                        step(x.to(device))

            if __name__ == "__main__":
                main()
            """,
            "19:11",
            "20:14",
            header=CUDA_SCRIPT,
            options={"num-workers": "4"},
            hints=(None, MOSTLY_NOT_WANTED),
            fixed="""
            import numpy as np
            from torch.utils.data import Dataset
            from torchvision import transforms
            from torchvision.datasets import CIFAR10

            class Arrays(Dataset):
                def __init__(self, files):
                    self.files = files
                def __len__(self):
                    return len(self.files)
                def __getitem__(self, index):
                    return np.load(self.files[index])

            def main():
                crop = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
                aug = DataLoader(CIFAR10("data", transform=crop), batch_size=64, num_workers=4)
                arrays = DataLoader(Arrays(files), batch_size=64, num_workers=4)
                for loader in (aug, arrays):
                    for x in loader:
                        step(x.to(device))

            if __name__ == "__main__":
                main()
            """,
        ),
        # a run of a handful of batches: a hint, whatever an item costs
        Invalid(
            """
            from torchvision import datasets, transforms

            def main():
                train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64)
                for i, (x, y) in enumerate(loader):
                    if i == 15:
                        break
                    step(x.to(device), y.to(device))

            if __name__ == "__main__":
                main()
            """,
            "8:14",
            header=CUDA_SCRIPT,
            options={"num-workers": "4"},
            hints=("the run loads only 16 batches",),
            fixed="""
            from torchvision import datasets, transforms

            def main():
                train_set = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(train_set, batch_size=64, num_workers=4)
                for i, (x, y) in enumerate(loader):
                    if i == 15:
                        break
                    step(x.to(device), y.to(device))

            if __name__ == "__main__":
                main()
            """,
        ),
        # absent or zero workers; set ones (a variable, positionally) and **kwargs are the user's
        # choice; a `num_workers=0` written in the call is reported with no fix: a deliberate value
        # (an evaluation loader over cheap synthetic data, a debugging run), as an explicit trainer
        # argument is
        Invalid(
            """
            import torch
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                device = torch.device("cuda")
                a = DataLoader(ds, batch_size=32)
                b = DataLoader(ds, batch_size=32, num_workers=0)
                c = DataLoader(ds, batch_size=32, num_workers=4)
                d = DataLoader(ds, batch_size=32, num_workers=args.workers)
                e = DataLoader(ds, 32, True, None, None, 4)
                f = DataLoader(ds, **options)
            """,
            "5:9",
            "6:9",
            hints=(UNKNOWN_COST_HINT,) * 2,
            messages=(
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch",
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch"
                + EXPLICIT_ZERO_NOTE,
            ),
            fixed="""
            import os

            import torch
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                device = torch.device("cuda")
                a = DataLoader(ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1))
                b = DataLoader(ds, batch_size=32, num_workers=0)
                c = DataLoader(ds, batch_size=32, num_workers=4)
                d = DataLoader(ds, batch_size=32, num_workers=args.workers)
                e = DataLoader(ds, 32, True, None, None, 4)
                f = DataLoader(ds, **options)
            """,
        ),
        # aliased imports, in functions and methods the main guard reaches
        Invalid(
            """
            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            def loaders():
                return tud.DataLoader(ds)
            class Runner:
                def fit(self):
                    return DL(ds)
            def main():
                Runner().fit(loaders())
            if __name__ == "__main__":
                main()
            """,
            "5:12",
            "8:16",
            hints=(UNKNOWN_COST_HINT,) * 2,
            fixed="""
            import os

            import torch.utils.data as tud
            from torch.utils.data import DataLoader as DL
            x = torch.zeros(1).cuda()
            def loaders():
                return tud.DataLoader(ds, num_workers=min(8, os.cpu_count() or 1))
            class Runner:
                def fit(self):
                    return DL(ds, num_workers=min(8, os.cpu_count() or 1))
            def main():
                Runner().fit(loaders())
            if __name__ == "__main__":
                main()
            """,
        ),
        # the fix imports os once, in its place among the imports, and keeps comments
        Invalid(
            """
            import sys

            import torch
            from torch.utils.data import DataLoader
            def main():
                device = torch.device("cuda")
                loader = DataLoader(ds, batch_size=32)  # keep me
                train(loader)  # and me
            if __name__ == "__main__":
                main()
            """,
            "7:14",
            hints=(UNKNOWN_COST_HINT,),
            fixed="""
            import os
            import sys

            import torch
            from torch.utils.data import DataLoader
            def main():
                device = torch.device("cuda")
                loader = DataLoader(
                    ds, batch_size=32, num_workers=min(8, os.cpu_count() or 1)
                )  # keep me
                train(loader)  # and me
            if __name__ == "__main__":
                main()
            """,
        ),
        # host-side: no accelerator needs to be named (and no GPU is said to wait); a keyword
        # dictionary without workers
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            if __name__ == "__main__":
                train = DataLoader(ds, **loader_kwargs)
                test = DataLoader(ds, **loader_kwargs, num_workers=0)
            """,
            "5:13",
            "6:12",
            hints=(UNKNOWN_COST_HINT,) * 2,
            messages=(_HOST_MESSAGE, _HOST_MESSAGE + EXPLICIT_ZERO_NOTE),
            fixed="""
            import os

            from torch.utils.data import DataLoader
            loader_kwargs = dict(batch_size=64, shuffle=True)
            loader_kwargs["drop_last"] = True
            if __name__ == "__main__":
                train = DataLoader(ds, **loader_kwargs, num_workers=min(8, os.cpu_count() or 1))
                test = DataLoader(ds, **loader_kwargs, num_workers=0)
            """,
        ),
        # zero workers inside the dictionary: reported, and no fix (a second `num_workers=` would not run)
        Invalid(
            """
            from torch.utils.data import DataLoader
            kwargs = {"batch_size": 64, "num_workers": 0}
            if __name__ == "__main__":
                loader = DataLoader(ds, **kwargs)
            """,
            "4:14",
            hints=(UNKNOWN_COST_HINT,),
        ),
        # one process per GPU (torchrun, DDP): the default divides the node's cores among its
        # ranks; a configured expression is written as it is
        Invalid(
            """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.data import DataLoader
            def main():
                torch.distributed.init_process_group("nccl")
                model = DDP(Net().cuda())
                loader = DataLoader(images, batch_size=32)
                train(model, loader)
            if __name__ == "__main__":
                main()
            """,
            "7:14",
            hints=(UNKNOWN_COST_HINT,),
            fixed="""
            import os

            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.data import DataLoader
            def main():
                torch.distributed.init_process_group("nccl")
                model = DDP(Net().cuda())
                loader = DataLoader(
                    images,
                    batch_size=32,
                    num_workers=min(
                        8,
                        max(
                            1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
                        ),
                    ),
                )
                train(model, loader)
            if __name__ == "__main__":
                main()
            """,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                dist.init_process_group("nccl")
                loader = DataLoader(ds, batch_size=32)
            """,
            "8:14",
            hints=(UNKNOWN_COST_HINT,),
            header=CUDA_SCRIPT,
            fixed="""
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            if __name__ == "__main__":
                dist.init_process_group("nccl")
                loader = DataLoader(ds, batch_size=32, num_workers=4)
            """,
            options={"num-workers": "4"},
        ),
        # the configured expression
        Invalid(
            """
            if __name__ == "__main__":
                loader = DataLoader(ds)
            """,
            "5:14",
            hints=(UNKNOWN_COST_HINT,),
            header=CUDA_SCRIPT,
            fixed="""
            if __name__ == "__main__":
                loader = DataLoader(ds, num_workers=4)
            """,
            options={"num-workers": "4"},
        ),
        # workers could not start: training at module level, a function nothing calls under the
        # guard, things that cannot be pickled into a worker
        Invalid(
            """
            loader = DataLoader(ds, batch_size=32)
            def helper():
                return DataLoader(ds)
            def main():
                def collate(batch):
                    return batch
                a = DataLoader(ds, collate_fn=lambda b: b)
                b = DataLoader(ds, collate_fn=collate)
                train(a, b)
            main()
            """,
            "4:10",
            "6:12",
            "10:9",
            "11:9",
            hints=(UNKNOWN_COST_HINT,) * 4,
            header=CUDA_SCRIPT,
        ),
        # a dataset whose transforms hold a lambda: it cannot be pickled into a worker under `spawn`
        Invalid(
            """
            from torchvision import datasets, transforms
            def main():
                transform = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x.mul(255))])
                train_dataset = datasets.ImageFolder("images", transform)
                loader = DataLoader(train_dataset, batch_size=4)
                for batch in loader:
                    step(batch)
            if __name__ == "__main__":
                main()
            """,
            "8:14",
            header=CUDA_SCRIPT,
        ),
        # what a factory function returns (a nested `collate`), and a function defined inside
        # `main`, cannot be pickled into a worker: no fix, and the message says why
        Invalid(
            """
            from torchvision import datasets, transforms

            def make_collate(tokenizer):
                def collate(batch):
                    return tokenizer(batch)
                return collate

            def main():
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                def keep(batch):
                    return batch
                a = DataLoader(images, batch_size=8, collate_fn=make_collate(tokenizer))
                b = DataLoader(images, batch_size=8, collate_fn=keep)
                for loader in (a, b):
                    for x in loader:
                        step(x.cuda())

            if __name__ == "__main__":
                main()
            """,
            "15:9",
            "16:9",
            header=CUDA_SCRIPT,
            messages=(
                "DataLoader loads batches in the training process: `ImageFolder` decodes a file for every item "
                "(line 12); the GPU waits for every batch (set `num_workers`) (no fix: what `make_collate()` "
                "returns, defined inside it, cannot be pickled into a worker under spawn or forkserver "
                '("Can\'t pickle local object"))',
                "DataLoader loads batches in the training process: `ImageFolder` decodes a file for every item "
                "(line 12); the GPU waits for every batch (set `num_workers`) (no fix: `keep`, defined inside "
                "a function, cannot be pickled into a worker under spawn or forkserver (\"Can't pickle local "
                'object"))',
            ),
        ),
        # a dataset whose `__getitem__` moves each item to the GPU: a forked worker cannot use CUDA
        Invalid(
            """
            from PIL import Image
            from torchvision.transforms.functional import to_tensor

            class OnGpu(Dataset):
                def __init__(self, files):
                    self.files = files
                def __getitem__(self, index):
                    return to_tensor(Image.open(self.files[index])).cuda()

            def main():
                for batch in DataLoader(OnGpu(files), batch_size=8):
                    step(batch)

            if __name__ == "__main__":
                main()
            """,
            "14:18",
            header=CUDA_SCRIPT,
            messages=(
                "DataLoader loads batches in the training process: `__getitem__` applies `to_tensor` to every "
                "item (line 11); the GPU waits for every batch (set `num_workers`) (no fix: the "
                "dataset's `__getitem__` moves each item to the GPU, which a forked worker cannot do (\"Cannot "
                're-initialize CUDA in forked subprocess"))',
            ),
        ),
        # the ranks sharing a node, as the launcher tells them: the `deepspeed` launcher sets
        # `LOCAL_SIZE` (not torchrun's `LOCAL_WORLD_SIZE`) ...
        Invalid(
            """
            import deepspeed
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            from torchvision import datasets, transforms

            def main():
                deepspeed.init_distributed()
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(images, batch_size=8, sampler=DistributedSampler(images))
                for x in loader:
                    step(x.cuda())

            if __name__ == "__main__":
                main()
            """,
            "10:14",
            fixed="""
            import os

            import deepspeed
            import torch
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            from torchvision import datasets, transforms

            def main():
                deepspeed.init_distributed()
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(
                    images,
                    batch_size=8,
                    sampler=DistributedSampler(images),
                    num_workers=min(
                        8, max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_SIZE", "1")))
                    ),
                )
                for x in loader:
                    step(x.cuda())

            if __name__ == "__main__":
                main()
            """,
        ),
        # ... and `mp.spawn` sets neither: one process per GPU of the node
        Invalid(
            """
            import torch
            import torch.distributed as dist
            import torch.multiprocessing as mp
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms

            def worker(rank, world_size):
                dist.init_process_group("nccl", rank=rank, world_size=world_size)
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(images, batch_size=8)
                for x in loader:
                    step(x.cuda(rank))

            if __name__ == "__main__":
                mp.spawn(worker, args=(4,), nprocs=4)
            """,
            "10:14",
            fixed="""
            import os

            import torch
            import torch.distributed as dist
            import torch.multiprocessing as mp
            from torch.utils.data import DataLoader
            from torchvision import datasets, transforms

            def worker(rank, world_size):
                dist.init_process_group("nccl", rank=rank, world_size=world_size)
                images = datasets.ImageFolder("data/train", transform=transforms.ToTensor())
                loader = DataLoader(
                    images,
                    batch_size=8,
                    num_workers=min(
                        8, max(1, (os.cpu_count() or 1) // max(1, torch.cuda.device_count()))
                    ),
                )
                for x in loader:
                    step(x.cuda(rank))

            if __name__ == "__main__":
                mp.spawn(worker, args=(4,), nprocs=4)
            """,
        ),
        # an IterableDataset that every worker would replay in full; a sharded one is fixed
        Invalid(
            """
            from torch.utils.data import IterableDataset, get_worker_info
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            class Sharded(Stream):
                def __iter__(self):
                    info = get_worker_info()
                    yield from range(info.id if info else 0, 10, info.num_workers if info else 1)
            if __name__ == "__main__":
                stream = Stream()
                a = DataLoader(stream)
                b = DataLoader(Sharded())
            """,
            "14:9",
            "15:9",
            hints=(UNKNOWN_COST_HINT,) * 2,
            header=CUDA_SCRIPT,
            fixed="""
            from torch.utils.data import IterableDataset, get_worker_info
            class Stream(IterableDataset):
                def __iter__(self):
                    yield from range(10)
            class Sharded(Stream):
                def __iter__(self):
                    info = get_worker_info()
                    yield from range(info.id if info else 0, 10, info.num_workers if info else 1)
            if __name__ == "__main__":
                stream = Stream()
                a = DataLoader(stream)
                b = DataLoader(Sharded(), num_workers=4)
            """,
            options={"num-workers": "4"},
            messages=(
                ITERABLE_MESSAGE,
                "DataLoader loads batches in the training process (no `num_workers`): the GPU waits for every batch",
            ),
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not is_dataloader(self.ctx, node) or not pipeline_consumed(self.ctx, node):
            return
        if fetches_one_batch(self.ctx, node):
            return  # one batch: workers would start, hand it over and stop, slower than loading it here
        keywords = self.ctx.values.keywords_of(node)
        if keywords is None:
            return  # `**options` this module does not show
        workers = keywords.get("num_workers")
        if workers is not None and not is_zero(workers):
            return  # set to something: the user's choice (a variable, a CLI argument)
        if len(positional_args(node)) >= 6:
            return  # num_workers given positionally (6th parameter)
        dataset = dataloader_dataset(node)
        verdict = self.ctx.loaders.verdict(node)
        if verdict.no_cost:
            return  # items indexed from memory: workers would only add the cost of handing batches over
        hint = verdict.hint
        start = self.ctx.workers
        if start.unsharded_iterable(node, dataset):
            self.report_with_evidence(node, verdict.kind, message=ITERABLE_MESSAGE, hint=hint)
            return
        message = self._message(verdict.evidence)
        no_fix = self._why_workers_cannot_start(node)
        if no_fix is not None:
            self.report_with_evidence(node, verdict.kind, message=f"{message} (no fix: {no_fix})", hint=hint)
            return
        if workers is not None or "num_workers" in (self.ctx.values.keywords_of(node, every_branch=True) or {}):
            # `num_workers=0` written in the call (a deliberate value: no fix), or inside a `**`
            # dictionary, on some branch (where a second `num_workers=` would not run)
            if keyword_arg(node, "num_workers") is not None:
                message += EXPLICIT_ZERO_NOTE
            self.report_with_evidence(node, verdict.kind, message=message, hint=hint)
            return
        expression, description, imports = self._workers_expression()
        fix = set_keyword(self.ctx, node, "num_workers", expression, Applicability.UNSAFE, description, imports)
        self.report_with_evidence(node, verdict.kind, message=message, fix=fix, hint=hint)

    def _why_workers_cannot_start(self, node: cst.Call) -> str | None:
        """Why workers would not start, or not pay, for this loader (see the docs); None where they would."""
        start = self.ctx.workers
        if not start.runs_as_main_program(node):
            return (
                'the loader is not built under `if __name__ == "__main__":`; a worker started under spawn or '
                "forkserver runs the module's top-level code again"
            )
        if self.ctx.loaders.items_on_device(node):
            return (
                "the dataset's `__getitem__` moves each item to the GPU, which a forked worker cannot do "
                '("Cannot re-initialize CUDA in forked subprocess")'
            )
        unpicklable = start.unpicklable(node)
        if unpicklable is not None:
            return (
                f"{unpicklable} cannot be pickled into a worker under spawn or forkserver "
                '("Can\'t pickle local object")'
            )
        return None

    def _message(self, evidence: str) -> str:
        """The message: what loading an item costs where the code shows it, and who waits -- the
        GPU only where the module runs on one (not a CPU-only trainer or device)."""
        on_accelerator = ACCELERATOR.holds(self.ctx) and not self.ctx.loaders.cpu_only
        if not evidence:
            return self.message if on_accelerator else _HOST_MESSAGE
        waits = "the GPU waits for every batch" if on_accelerator else "each step waits for its batch"
        return f"DataLoader loads batches in the training process: {evidence}; {waits} (set `num_workers`)"

    def _workers_expression(self) -> tuple[str, str, tuple[str, ...]]:
        """The `num_workers=` value the fix writes, its description and the imports it needs: the
        `num-workers` option when the project sets it; else, in a module that runs one process per
        GPU (every rank starts its own workers, GL605), the node's cores divided among its ranks,
        counted the way the script's launcher tells them."""
        if NUM_WORKERS.key not in self.ctx.options and ONE_PROCESS_PER_GPU.holds(self.ctx):
            local_ranks, imports = self._local_ranks()
            expression = f"min(8, {cores_per_rank(local_ranks)})"
            description = (
                "Load batches in worker processes, the node's CPU cores divided among its ranks: "
                f"`num_workers={expression}`"
            )
            return expression, description, ("import os", *imports)
        expression = str(self.option(NUM_WORKERS))
        imports = ("import os",) if "os." in expression else ()
        return expression, f"Load batches in worker processes: `num_workers={expression}`", imports

    def _local_ranks(self) -> tuple[str, tuple[str, ...]]:
        """How many ranks share the node, read the way the script's launcher tells them (options.py)."""
        if any(self.ctx.call_qualified_name(call) in _SPAWNS for call in self.ctx.index.nodes("Call")):
            text, imports = self.ctx.reference("torch.cuda.device_count")
            return LOCAL_RANKS_SPAWN.replace("torch.cuda.device_count", text), imports
        if self.ctx.uses("deepspeed"):
            return LOCAL_RANKS_DEEPSPEED, ()
        return LOCAL_RANKS_TORCHRUN, ()
