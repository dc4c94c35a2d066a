import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 2).to("cuda:0")
loader = DataLoader(range(10), num_workers=2, pin_memory=True, persistent_workers=True)
