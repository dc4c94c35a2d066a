"""Mixed precision through the deprecated `torch.cuda.amp` API (switched off on CPU)."""

import torch
from torch import nn
from torch.cuda import amp
from torch.cuda.amp import GradScaler, autocast

compile_model = False


def main():
    use_amp = torch.cuda.is_available()
    device = "cuda" if use_amp else "cpu"
    model = nn.Linear(4, 2).to(device)
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(enabled=use_amp)
    spare = amp.GradScaler(enabled=use_amp)
    for step in range(4):
        x = torch.randn(8, 4).to(device)
        with autocast(enabled=use_amp):
            loss = model(x).float().pow(2).mean()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    assert spare.is_enabled() == use_amp


if __name__ == "__main__":
    main()
