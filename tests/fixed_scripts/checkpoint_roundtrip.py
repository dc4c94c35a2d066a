"""Starts from a checkpoint, trains, saves, and loads what it saved into a fresh model: the keys of
the model's `state_dict` are the program's contract with its checkpoints, and a fix must keep them."""

import os
import tempfile

import torch
from torch import nn


def build():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = tempfile.mkdtemp()
    start = os.path.join(out, "start.pt")
    torch.save(build().state_dict(), start)

    model = build().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.load_state_dict(torch.load(start, map_location=device))
    data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
    for x, y in data:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), os.path.join(out, "final.pt"))

    restored = build()
    restored.load_state_dict(torch.load(os.path.join(out, "final.pt"), map_location="cpu"))


if __name__ == "__main__":
    main()
