"""A tutorial-style script: the whole training loop runs at module level, with no main guard."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

compile_model = False


class Pairs(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, index):
        x = torch.full((4,), float(index % 3))
        return x, (x[:1] > 1).float()


device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(4, 1).to(device)
if compile_model:
    model = torch.compile(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loader = DataLoader(Pairs(), batch_size=8, shuffle=True)
seen = 0
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += len(x)
assert seen == 64, seen
