"""A step costs 20 ms plus 0.1 ms per sample (sleeps), so throughput grows with the batch; from a
batch of 128 on the first forward raises torch's out-of-memory error, standing in for a GPU's
memory limit on a machine without one."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

torch.set_num_threads(1)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(100000, 4)), batch_size=args.batch_size)
for (x,) in loader:
    if len(x) >= 128:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (a simulated device limit)")
    model(x).sum().backward()
    time.sleep(0.020 + 0.0001 * len(x))
    optimizer.step()
    optimizer.zero_grad()
