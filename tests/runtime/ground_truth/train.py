"""A CPU training loop with one bottleneck built in, switched by GT_BOTTLENECK, that times its own
phases and writes them to GT_TIMERS (JSON; under a launcher GT_TIMERS.rank<RANK>) when it ends,
so a test can hold the profiler's verdict against what the script itself measured.

    GT_BOTTLENECK=healthy     the step is the model's forward, backward and optimizer step
    GT_BOTTLENECK=loader      a Dataset that takes ~3 ms a sample, read in the main process
    GT_BOTTLENECK=checkpoint  torch.save of the model and weight averages every step
    GT_BOTTLENECK=logging     every weight written as text, a line per parameter fsync'ed, every step
    GT_BOTTLENECK=validation  a validation pass over a held-out loader every step
    GT_BOTTLENECK=hostsync    the outputs read on the host (.tolist()) every step
    GT_BOTTLENECK=respawn     a loader with 4 workers over 2 ready batches: its workers are started
                              again every epoch, that is every 2 steps, and starting each costs the
                              parent ~25 ms of CPU (RESPAWN_WORK), as forking a large process does
    GT_BOTTLENECK=straggler   under torchrun: rank 1 does GT_STRAGGLE_MS (24) more work per step
    GT_BOTTLENECK=collective  under torchrun: a large extra parameter all-reduced every step

Phases: "data" (next(batch)), "compute" (forward, backward, optimizer step), and the bottleneck's
own ("checkpoint", "logging", "validation", "hostsync", "straggle", "respawn": iter(loader), where
a new iterator starts its workers).  The optimizer step is timed
from the step hook's side too: gpulint stops the run by raising from inside optimizer.step(), so
the last step's compute is cut short; the file is written in `finally:`.
"""

import functools
import json
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

BOTTLENECK = os.environ.get("GT_BOTTLENECK", "healthy")
TIMERS = os.environ.get("GT_TIMERS")
STRAGGLE_S = float(os.environ.get("GT_STRAGGLE_MS", "24")) / 1000
BATCH = 64
FEATURES = 256
# The parent's own work for each worker it forks.  A small script forks in a few milliseconds, less
# than its step; a real trainer (a large model, a CUDA context, mapped data) pays far more.  This
# stands in for that cost: CPU work, so it slows with the step on a busy machine and the share
# holds, and run in C (sum over a range), so no frame of this file is under the loader's code and
# the stack reads as the loader starting its workers.
RESPAWN_WORK = functools.partial(sum, range(1_500_000))


class SlowDataset(Dataset):
    """Each sample costs about 3 ms to prepare (decoding, augmentation)."""

    def __len__(self):
        return 100_000

    def __getitem__(self, index):
        time.sleep(0.003)
        return torch.randn(FEATURES), torch.randn(1)


class Model(nn.Module):
    def __init__(self, extra_bytes: int = 0):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1)
        )
        # a parameter that only adds bytes to every all-reduce (its gradient is zero)
        self.extra = nn.Parameter(torch.zeros(extra_bytes // 4)) if extra_bytes else None

    def forward(self, x):
        out = self.layers(x)
        return out if self.extra is None else out + 0 * self.extra.sum()


def distributed_rank():
    if "RANK" not in os.environ:
        return None
    torch.distributed.init_process_group("gloo")
    return torch.distributed.get_rank()


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank = distributed_rank()
    model = Model(16 * 2**20 if BOTTLENECK == "collective" else 0)  # 16 MB more to all-reduce every step
    if rank is not None:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    if BOTTLENECK == "loader":
        loader = DataLoader(SlowDataset(), batch_size=16, num_workers=0)
    elif BOTTLENECK == "respawn":
        two_batches = TensorDataset(torch.randn(2, BATCH, FEATURES), torch.randn(2, BATCH, 1))
        loader = DataLoader(two_batches, batch_size=None, num_workers=4)
        os.register_at_fork(before=RESPAWN_WORK)
    else:
        # whole batches stored ready: reading one costs next to nothing beside the step
        batches = TensorDataset(torch.randn(64, BATCH, FEATURES), torch.randn(64, BATCH, 1))
        loader = DataLoader(batches, batch_size=None)
    validation = DataLoader(TensorDataset(torch.randn(2048, FEATURES), torch.randn(2048, 1)), batch_size=256)
    timers = {"data": 0.0, "compute": 0.0, "checkpoint": 0.0, "logging": 0.0, "validation": 0.0}
    timers.update({"hostsync": 0.0, "straggle": 0.0, "respawn": 0.0, "steps": 0})
    log = open(os.path.join(tempfile.mkdtemp(), "train.log"), "a")
    checkpoint = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
    averaged = [p.detach().clone() for p in model.parameters() for _ in range(8)]  # saved with the model
    try:
        for epoch in range(1000):
            started = time.perf_counter()
            batches = iter(loader)
            timers["respawn"] += time.perf_counter() - started
            while True:
                started = time.perf_counter()
                try:
                    x, y = next(batches)
                except StopIteration:  # the epoch's end: a loader shuts its workers down here
                    timers["data"] += time.perf_counter() - started
                    break
                timers["data"] += time.perf_counter() - started

                started = time.perf_counter()
                output = model(x)
                loss = nn.functional.mse_loss(output, y)
                optimizer.zero_grad()
                loss.backward()
                if BOTTLENECK == "straggler" and rank == 1:
                    straggle = time.perf_counter()
                    time.sleep(STRAGGLE_S)
                    timers["straggle"] += time.perf_counter() - straggle
                timers["compute"] += time.perf_counter() - started
                started = time.perf_counter()
                timers["steps"] += 1
                optimizer.step()
                timers["compute"] += time.perf_counter() - started

                if BOTTLENECK == "checkpoint":
                    started = time.perf_counter()
                    torch.save({"model": model.state_dict(), "averages": averaged}, checkpoint)
                    timers["checkpoint"] += time.perf_counter() - started
                if BOTTLENECK == "logging":
                    started = time.perf_counter()
                    # every weight as text, each line flushed to the disk: formatting costs CPU as
                    # compute does, so the share holds on a busy machine as on an idle one
                    for name, parameter in model.named_parameters():
                        log.write(
                            f"{epoch} {name} "
                            + " ".join(f"{v:.5f}" for v in parameter.detach().flatten()[:40000].tolist())
                            + "\n"
                        )
                        log.flush()
                        os.fsync(log.fileno())
                    timers["logging"] += time.perf_counter() - started
                if BOTTLENECK == "validation":
                    started = time.perf_counter()
                    model.eval()
                    with torch.no_grad():
                        for vx, vy in validation:
                            nn.functional.mse_loss(model(vx), vy)
                    model.train()
                    timers["validation"] += time.perf_counter() - started
                if BOTTLENECK == "hostsync":
                    started = time.perf_counter()
                    # only the read itself: Python work on the values after it is other host work,
                    # which the profiler rightly does not call a sync, and the timers must agree
                    values = output.detach().repeat(1, 24000).tolist()
                    timers["hostsync"] += time.perf_counter() - started
                    del values
    finally:
        log.close()
        if TIMERS:
            path = TIMERS if rank is None else f"{TIMERS}.rank{rank}"
            with open(path, "w") as handle:
                json.dump(timers, handle)


if __name__ == "__main__":
    main()
