"""A loop that updates its weights by hand: backward(), then `w -= lr * w.grad`; no torch.optim."""

import time

import torch

w = torch.zeros(4, requires_grad=True)
for _ in range(400):
    x = torch.randn(8, 4)
    loss = (x @ w - 1).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad.zero_()
    time.sleep(0.002)
