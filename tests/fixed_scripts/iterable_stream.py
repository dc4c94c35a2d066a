"""Two IterableDatasets: one that every worker would replay in full, one that shards itself by
`get_worker_info()`.  The script checks that each item arrives exactly once."""

import argparse
from collections import Counter

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

compile_model = False


class Stream(IterableDataset):
    def __iter__(self):
        for index in range(24):
            yield torch.tensor([float(index)])


class ShardedStream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, stride = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, 24, stride):
            yield torch.tensor([float(index)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(1, 1).to(device)
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    stream_loader = DataLoader(Stream(), batch_size=4)
    sharded_loader = DataLoader(ShardedStream(), batch_size=4)
    for loader in (stream_loader, sharded_loader):
        counts = Counter()
        for epoch in range(2):
            for batch in loader:
                counts.update(int(v) for v in batch.flatten())
                loss = model(batch.to(device)).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        assert sorted(counts) == list(range(24)) and set(counts.values()) == {2}, counts
    # A loader sized by a command-line argument.
    fixed = DataLoader(ShardedStream(), batch_size=4, num_workers=int(args.workers))
    for epoch in range(2):
        seen = 0
        for batch in fixed:
            seen += len(batch)
        assert seen == 24, seen


if __name__ == "__main__":
    main()
