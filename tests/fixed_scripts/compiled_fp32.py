"""Plain fp32 training: what the hint rules about precision and compilation fix."""

import torch
from torch import nn


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(3)]
    for x, y in data:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
