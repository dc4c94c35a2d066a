"""A training script in the `main()` shape: workers, logging, evaluation and checkpoints per step."""

import logging
import os
import sys
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

logger = logging.getLogger("train")
compile_model = False  # torch.compile is opt-in here


class Ramp(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, index):
        x = torch.full((4,), float(index % 7) / 7)
        return x, x.sum().unsqueeze(0)


def evaluate(model, loader, device):
    model.eval()
    total = torch.zeros(1).to(device)
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.mse_loss(model(x.to(device)), y.to(device))
    model.train()
    return total


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    train_loader = DataLoader(Ramp(), batch_size=8, shuffle=True)
    val_loader = DataLoader(Ramp(), batch_size=16)
    out = tempfile.mkdtemp()
    steps = 0
    for epoch in range(2):
        for step, (x, y) in enumerate(train_loader):
            x = x.to(device)
            y = y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
            lossf = loss.item()
            print(f"epoch {epoch} step {step} loss {lossf:.4f}")
            logger.info("step %d weight norm %.4f", step, model[0].weight.norm())
            evaluate(model, val_loader, device)
            torch.save(model.state_dict(), os.path.join(out, "last.pt"))
    assert steps == 12, steps
    assert os.path.exists(os.path.join(out, "last.pt"))
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
