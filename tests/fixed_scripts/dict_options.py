"""Loader options built in a dictionary, with workers on the accelerator branch only: on a CPU-only
machine the loader has none, and the fixes must keep that working (`persistent_workers=True`
raises without workers).  A loader without options gets `pin_memory=` from the script's own
flag: pinning on a machine without a GPU warns, and this script treats that warning as an error."""

import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

compile_model = False
warnings.filterwarnings("error", message=".*pin_memory.*no accelerator")


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
    val_loader = DataLoader(Ramp(), batch_size=8)
    with torch.no_grad():
        total = sum(model(x.to(device)).pow(2).sum() for x, _ in val_loader)
    assert torch.isfinite(total)


if __name__ == "__main__":
    main()
