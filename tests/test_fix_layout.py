"""Fixed code is laid out as the project's formatters would lay it out: black leaves it alone (lines
a fix made long are wrapped as black wraps them), ruff's import sorting (isort's rules) finds
nothing to move, and one guard covers a block of adjacent per-step lines.

Each input is already black-formatted and isort-clean, so anything the formatters would change
after the fix is the fix's doing.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst
import pytest

from gpulint.linter.fix.wrap import wrap_statement
from tests.helpers import fix

BLACK = [sys.executable, "-m", "black"]
RUFF = [sys.executable, "-m", "ruff"]

INPUTS = {
    "main-loaders": (
        ["GL101", "GL102", "GL103", "GL104"],
        """
        import argparse
        import time

        import torch
        from torch.utils.data import DataLoader


        def main():
            parser = argparse.ArgumentParser()
            args = parser.parse_args()
            device = torch.device("cuda")
            train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
            val_loader = DataLoader(val_set, batch_size=256, num_workers=int(args.workers))
            for epoch in range(args.epochs):
                start = time.time()
                for images, labels in train_loader:
                    images, labels = images.to(device), labels.to(device)
                    loss = model(images, labels)
                    loss.backward()
                    optimizer.step()
                evaluate(model, val_loader)


        if __name__ == "__main__":
            main()
        """,
    ),
    # GL803's conditional precision, too long for its line: in a call on one line and in one
    # already an argument a line
    "lightning-precision": (
        ["GL803"],
        """
        import lightning as L
        import torch


        def main():
            trainer = L.Trainer(max_epochs=10, accelerator="gpu", devices=1)
            tuned = L.Trainer(
                max_epochs=10,
                accelerator="gpu",
                devices=1,
            )
            trainer.fit(model)
            tuned.fit(model)
        """,
    ),
    "tf-pipeline": (
        ["GL701", "GL702"],
        """
        import tensorflow as tf


        def make_dataset(files, batch_size):
            dataset = tf.data.TFRecordDataset(files).map(parse_example).shuffle(10_000).batch(batch_size)
            return dataset


        model.fit(make_dataset(train_files, 64), epochs=10)
        """,
    ),
    "hf-trainer": (
        ["GL801", "GL803"],
        """
        from transformers import Trainer, TrainingArguments


        def main():
            args = TrainingArguments(output_dir="checkpoints/run-1", per_device_train_batch_size=32, num_train_epochs=3)
            Trainer(model=model, args=args, train_dataset=train_set).train()


        if __name__ == "__main__":
            main()
        """,
    ),
    "logging": (
        ["GL201", "GL301", "GL302", "GL303"],
        """
        import logging

        import torch
        import wandb

        logger = logging.getLogger(__name__)
        device = torch.device("cuda")
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            lossf = loss.item()
            print(f"step {step} loss {lossf:.4f}")
            logger.info("lr %s", scheduler.get_last_lr())
            wandb.log({"loss": lossf, "step": step})
            evaluate(model, val_loader)
            torch.save(model.state_dict(), "last.pt")
        """,
    ),
    # A loop header a fix makes too long, and a line that no longer fits once a guard moves it in.
    "tf-loop": (
        ["GL302", "GL702", "GL706"],
        """
        import tensorflow as tf


        def train(model, optimizer, loss_fn, paths, labels, epochs):
            train_dataset = tf.data.Dataset.from_tensor_slices((paths, labels)).batch(64)
            for epoch in range(epochs):
                for step, (images, labels) in enumerate(train_dataset):
                    with tf.GradientTape() as tape:
                        loss = loss_fn(labels, model(images, training=True))
                    grads = tape.gradient(loss, model.trainable_variables)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
                    print(f"epoch {epoch} step {step} loss {loss.numpy():.4f} in this trial")
        """,
    ),
    # A `with` header a fix makes too long, and an argument of a call already one argument a line.
    "amp-ddp": (
        ["GL402", "GL605"],
        """
        import os

        import torch
        from torch.cuda.amp import autocast
        from torch.utils.data import DataLoader, DistributedSampler


        def main():
            loader = DataLoader(
                train_set,
                batch_size=64,
                sampler=DistributedSampler(train_set),
                num_workers=os.cpu_count(),
                pin_memory=True,
            )
            for images, labels in loader:
                with autocast(dtype=torch.float16, enabled=use_mixed_precision_in_this_run):
                    loss = model(images, labels)
                loss.backward()


        if __name__ == "__main__":
            main()
        """,
    ),
    # A `with` of two items that a fix makes too long: split inside the last item's call.
    "amp-two-items": (
        ["GL402"],
        """
        import torch
        from torch.cuda.amp import autocast


        def train(model, loader):
            for images, labels in loader:
                with torch.jit.fuser("fuser2"), autocast(enabled=use_mixed_precision_this_run):
                    loss = model(images, labels)
                loss.backward()
        """,
    ),
}


def _formatted(source: str) -> str:
    """The input as black writes it (the inputs are written for reading, then normalised here)."""
    # A target black cannot take from this repository's pyproject (requires-python >= 3.10 would let it
    # write parenthesised `with` items): fixed code must run on every Python the user's project may
    # support, and for those black splits a long `with` inside its last call, as the fixes do.
    command = [*BLACK, "-q", "--target-version", "py38", "-"]
    return subprocess.run(command, input=source, capture_output=True, text=True, check=True).stdout


def _missing(tool: list[str]) -> bool:
    return subprocess.run([*tool, "--version"], capture_output=True).returncode != 0


needs_black = pytest.mark.skipif(_missing(BLACK), reason="black is not installed (the dev extra)")
needs_ruff = pytest.mark.skipif(_missing(RUFF), reason="ruff is not installed (the dev extra)")


@needs_black
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_black_leaves_fixed_code_alone(name):
    select, source = INPUTS[name]
    original = _formatted(textwrap.dedent(source).lstrip("\n"))
    fixed = fix(original, select)
    assert fixed != original, "the input has nothing to fix"
    assert _formatted(fixed) == fixed


@needs_black
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fixed_lines_fit_the_line_length(name):
    select, source = INPUTS[name]
    fixed = fix(_formatted(textwrap.dedent(source).lstrip("\n")), select)
    assert max(len(line) for line in fixed.splitlines()) <= 88, fixed


@needs_ruff
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_ruff_import_sorting_leaves_fixed_code_alone(name, tmp_path):
    select, source = INPUTS[name]
    path = tmp_path / "fixed.py"
    path.write_text(fix(textwrap.dedent(source).lstrip("\n"), select))
    result = subprocess.run(
        [*RUFF, "check", "--isolated", "--select", "I", "--diff", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_guard_for_a_block_of_log_lines():
    select, source = INPUTS["logging"]
    fixed = fix(textwrap.dedent(source).lstrip("\n"), select)
    assert fixed.count("if step % 100 == 0:") == 1
    # the read-back moved in with the lines that print it; evaluation and checkpoint share theirs
    assert "if step % 100 == 0:\n        lossf = loss.item()" in fixed
    assert fixed.count("if step % 1000 == 0:") == 1


def test_a_moved_statement_keeps_its_authors_layout():
    # Not black's layout: the guard moves it in as the author wrote it, spaces around `%` included,
    # every line four columns further in and no longer than that.
    source = textwrap.dedent(
        """
        import torch

        for epoch in range(niter):
            for i, data in enumerate(dataloader):
                output = netD(data)
                errD = criterion(output, label)
                errD.backward()
                optimizerD.step()
                print('[%d/%d][%d/%d] Loss_D: %.4f D(x): %.4f D(G(z)): %.4f / %.4f of the batches'
                      % (epoch, niter, i, len(dataloader),
                         errD.item(), D_x, D_G_z1, D_G_z2))
        """
    ).lstrip("\n")
    fixed = fix(source, ["GL302"])
    assert (
        "        if i % 100 == 0:\n"
        "            print('[%d/%d][%d/%d] Loss_D: %.4f D(x): %.4f D(G(z)): %.4f / %.4f of the batches'\n"
        "                  % (epoch, niter, i, len(dataloader),\n"
        "                     errD.item(), D_x, D_G_z1, D_G_z2))\n"
    ) in fixed
    assert max(map(len, fixed.splitlines())) == max(map(len, source.splitlines())) + 4


def test_joined_lines_keep_spaces_around_operators():
    # A statement split at an operator, too long once moved in: joined, the operator keeps its spaces.
    statement = cst.parse_statement("value_with_long_name = compute(first\n                               + second)\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    wrapped = wrap_statement(statement, " " * 8, "    ", 45)
    assert cst.Module([]).code_for_node(wrapped) == "value_with_long_name = compute(\n    first + second\n)\n"
