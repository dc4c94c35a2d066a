"""Saves once, on the last step, and logs once, on the first: one-shot conditions, not intervals."""

import os
import tempfile

import torch
from torch import nn

compile_model = False


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(3, 1).to(device)
    if compile_model:
        model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    out = tempfile.mkdtemp()
    num_steps = 6
    batches = [torch.randn(4, 3) for _ in range(num_steps)]
    for step, x in enumerate(batches):
        is_last_batch = step == len(batches) - 1
        loss = model(x.to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == 0:
            print("first step done")
        if step == num_steps - 1:
            torch.save(model.state_dict(), os.path.join(out, "final.pt"))
        if is_last_batch:
            torch.save(optimizer.state_dict(), os.path.join(out, "optimizer.pt"))
    assert os.path.exists(os.path.join(out, "final.pt")), "the final checkpoint was not written"
    assert os.path.exists(os.path.join(out, "optimizer.pt")), "the optimizer state was not written"


if __name__ == "__main__":
    main()
