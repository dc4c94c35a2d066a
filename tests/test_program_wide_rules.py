"""Rules whose finding in one module depends on what another module of the project does: the
model wrapped for data parallel training elsewhere (GL603), a function of another module that
runs Python inside a tf.data map (GL703), the epochs a command-line parser another module builds
defaults to (GL103).  Each is linted as a user runs gpulint on a folder."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli

# Gradient accumulation in a training script that uses torch.distributed but wraps nothing itself.
ACCUMULATING_TRAIN = """\
import torch
import torch.distributed as dist

from parallel import wrap_model

dist.init_process_group("nccl")
model = wrap_model(net)
for step, batch in enumerate(loader):
    loss = model(batch) / accum_steps
    loss.backward()
    if (step + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
WRAPPING_HELPER = """\
from torch.nn.parallel import DistributedDataParallel


def wrap_model(net):
    return DistributedDataParallel(net.cuda())
"""
PLAIN_HELPER = """\
def wrap_model(net):
    return net.cuda()
"""
# A tf.data pipeline whose mapped lambda calls a function of another module that runs Python.
PY_FUNCTION_UTILS = """\
import tensorflow as tf


def read(path):
    return open(path.numpy(), "rb").read()


def load(path):
    return tf.py_function(read, [path], tf.string)
"""
PY_FUNCTION_TRAIN = """\
import tensorflow as tf

from utils import load

ds = tf.data.Dataset.from_tensor_slices(paths)
ds = ds.map(lambda x: load(x)).batch(32)
model.fit(ds, epochs=3)
"""

# A training script whose command-line parser another module of the project builds.
EPOCHS_TRAIN = """\
import torch

from utils import get_argument_parser


def train(args):
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
    for epoch in range(args.epochs):
        for images in loader:
            loss = model(images.cuda()).mean()
            loss.backward()
            optimizer.step()


train(get_argument_parser().parse_args())
"""
PARSER_UTILS = """\
import argparse


def get_argument_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--epochs", type=int, default={epochs})
    return parser
"""


def _findings(tmp_path, monkeypatch, capsys, select: str, files: dict[str, str]) -> list[tuple[str, int, int]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["--select", select, "--no-cache", "--output-format", "json", "."], capsys)
    assert code in (0, 1), err
    return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["location"]["column"]) for f in json.loads(out)]


@pytest.mark.parametrize(("helper", "expected"), [(WRAPPING_HELPER, [("train.py", 10, 5)]), (PLAIN_HELPER, [])])
def test_accumulation_sync_needs_a_model_wrapped_somewhere_in_the_program(
    tmp_path, monkeypatch, capsys, helper, expected
):
    files = {"train.py": ACCUMULATING_TRAIN, "parallel.py": helper}
    assert _findings(tmp_path, monkeypatch, capsys, "GL603", files) == expected


def test_py_function_of_another_module_in_a_mapped_lambda_is_reported_at_its_call(tmp_path, monkeypatch, capsys):
    files = {"train.py": PY_FUNCTION_TRAIN, "utils.py": PY_FUNCTION_UTILS}
    assert _findings(tmp_path, monkeypatch, capsys, "GL703", files) == [("train.py", 6, 23)]


@pytest.mark.parametrize(("epochs", "expected"), [(1, []), (10, [("train.py", 7, 14)])])
def test_loader_of_a_run_whose_parser_elsewhere_defaults_to_one_epoch_is_not_reported(
    tmp_path, monkeypatch, capsys, epochs, expected
):
    files = {"train.py": EPOCHS_TRAIN, "utils.py": PARSER_UTILS.format(epochs=epochs)}
    assert _findings(tmp_path, monkeypatch, capsys, "GL103", files) == expected
