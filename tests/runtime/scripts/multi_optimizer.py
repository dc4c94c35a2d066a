"""Two optimizers at different rates and gradient accumulation, with known sleeps.

Each sample sleeps 1 ms (4 ms a batch); each optimizer step sleeps 10 ms of "compute".  SGD steps
every `--accumulate` batches, Adam every second SGD step.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Sleepy(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, index):
        time.sleep(0.001)
        return torch.full((4,), float(index)), torch.tensor(index % 2)


torch.set_num_threads(1)  # tiny tensors: threads only add contention on a busy machine
parser = argparse.ArgumentParser()
parser.add_argument("--accumulate", type=int, default=2)
args = parser.parse_args()

model = nn.Linear(4, 2)
head = nn.Linear(4, 2)
sgd = torch.optim.SGD(model.parameters(), lr=0.01)
adam = torch.optim.Adam(head.parameters(), lr=0.01)
loader = DataLoader(Sleepy(), batch_size=4)
steps = 0
for batch, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x) + head(x), y) / args.accumulate
    loss.backward()
    if (batch + 1) % args.accumulate == 0:
        time.sleep(0.010)
        sgd.step()
        sgd.zero_grad()
        steps += 1
        if steps % 2 == 0:
            adam.step()
            adam.zero_grad()
