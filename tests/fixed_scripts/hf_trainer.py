"""A Hugging Face Trainer run that logs, evaluates and saves every couple of steps.

transformers is imported in main(): the loader workers that the fix adds start by importing this
module (under spawn), and need only torch for the dataset -- not seconds of transformers each."""

import tempfile

import torch
from torch import nn
from torch.utils.data import Dataset


class Points(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, index):
        return {"x": torch.full((4,), float(index % 4)), "labels": torch.tensor([float(index % 2)])}


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        out = self.linear(x)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


def main():
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        tempfile.mkdtemp(),
        max_steps=4,
        per_device_train_batch_size=4,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=2,
        save_steps=2,
        report_to=[],
        disable_tqdm=True,
    )
    trainer = Trainer(model=Regressor(), args=args, train_dataset=Points(), eval_dataset=Points())
    result = trainer.train()
    assert result.global_step == 4


if __name__ == "__main__":
    main()
