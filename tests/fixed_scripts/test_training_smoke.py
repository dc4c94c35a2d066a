"""A test file: it trains a few steps and checks what a per-step log line shows."""

import torch
from torch import nn

compile_model = False


def test_logs_every_step(capsys):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(2, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.ones(1, 2).to(device)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.3f}")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["0", "1", "2"]
