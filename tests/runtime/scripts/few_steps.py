"""Two optimizer steps, then the script ends by itself."""

import torch

w = torch.zeros(2, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    (w - 1).pow(2).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
