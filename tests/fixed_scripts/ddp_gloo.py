"""One-process DDP over gloo, with a loader that takes every CPU core."""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

compile_model = False


class Shapes(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, index):
        return torch.full((4,), float(index)), torch.tensor([float(index % 2)])


def main():
    store = os.path.join(tempfile.mkdtemp(), "store")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = DistributedDataParallel(nn.Linear(4, 1).to(device))
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    dataset = Shapes()
    loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset), num_workers=os.cpu_count())
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
