"""A CPU training loop fed by its own batch function, nanoGPT's shape: `x, y = get_batch('train')`
opens every step and no DataLoader is in play.  GT_BOTTLENECK switches the function:

    GT_BOTTLENECK=healthy  slices batches out of a tensor held in memory (next to nothing)
    GT_BOTTLENECK=slow     also decodes each batch for ~60 ms (a sleep: a read from a slow disk)

Every 25th step it also reads one validation batch (`get_batch('val')` with gradients off), which
is not the training loop's data wait.  It times its own phases, "data" (the training batches) and
"compute" (forward, backward, optimizer step), and writes them to GT_TIMERS (JSON) when it ends.
"""

import json
import os
import time

import torch
from torch import nn

BOTTLENECK = os.environ.get("GT_BOTTLENECK", "healthy")
TIMERS = os.environ.get("GT_TIMERS")
BATCH = 64
FEATURES = 256

torch.manual_seed(0)
torch.set_num_threads(1)
train_data = torch.randn(4096, FEATURES + 1)
val_data = torch.randn(512, FEATURES + 1)


def get_batch(split):
    data = train_data if split == "train" else val_data
    rows = torch.randint(len(data), (BATCH,))
    batch = data[rows]
    if BOTTLENECK == "slow":
        time.sleep(0.06)
    return batch[:, :FEATURES], batch[:, FEATURES:]


def main():
    model = nn.Sequential(nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    timers = {"data": 0.0, "compute": 0.0, "steps": 0}
    try:
        for step in range(100_000):
            started = time.perf_counter()
            x, y = get_batch("train")
            timers["data"] += time.perf_counter() - started

            started = time.perf_counter()
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            timers["steps"] += 1
            optimizer.step()
            timers["compute"] += time.perf_counter() - started

            if step % 25 == 0:
                with torch.no_grad():
                    vx, vy = get_batch("val")
                    nn.functional.mse_loss(model(vx), vy)
    finally:
        if TIMERS:
            with open(TIMERS, "w") as handle:
                json.dump(timers, handle)


if __name__ == "__main__":
    main()
