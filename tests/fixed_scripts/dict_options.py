"""Loader options built in a dictionary, with workers on the accelerator branch only: on a CPU-only
machine the loader has none, and the fixes must keep that working (`persistent_workers=True`
raises without workers)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

compile_model = False


class Ramp(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, index):
        x = torch.full((4,), float(index) / 24)
        return x, torch.tensor(index)


def main():
    use_accel = torch.cuda.is_available()
    device = torch.device("cuda" if use_accel else "cpu")
    train_kwargs = {"batch_size": 4}
    if use_accel:
        train_kwargs.update({"num_workers": 1, "pin_memory": True, "shuffle": True})
    model = nn.Linear(4, 1).to(device)
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Ramp(), **train_kwargs)
    for epoch in range(2):
        seen = []
        for x, index in loader:
            loss = model(x.to(device)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += index.tolist()
        assert sorted(seen) == list(range(24)), f"epoch {epoch} did not see every item once"


if __name__ == "__main__":
    main()
