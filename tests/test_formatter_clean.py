"""Fixed code stays formatter-clean: training scripts formatted with ruff format or black at their
project's line length (gpulint reads it from the project's pyproject.toml), fixed with `gpulint
--fix --unsafe-fixes`, leave `ruff format --check` and `black --check` nothing to change.

The scripts: the bundled fixtures, and three written here in the shapes that exercise the fixes
most (a GAN loop with read-backs and a percent-formatted progress line, a few L-BFGS steps, a
data set of a handful of batches an epoch).  Each tree is formatted first, so anything the
formatter finds afterwards is the fixes' doing.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import FIXTURES, ROOT

FORMATTERS = {
    # formatter: (its command, the project's line length, the pyproject.toml section that sets it)
    "ruff": ([sys.executable, "-m", "ruff", "format"], 100, "tool.ruff"),
    "black": ([sys.executable, "-m", "black", "-q"], 79, "tool.black"),
}

# A loop of 15 L-BFGS steps is too short for any guard to help: its prints stay as they are.
NOTHING_TO_FIX = {"sequence_lbfgs.py"}

SCRIPTS = {
    "gan_training.py": '''\
"""A GAN trained the classic way: two optimizers, three read-backs and a percent-formatted
progress line per batch, samples saved every 100 batches (shaped like the common DCGAN examples)."""

import argparse

import torch
import torch.nn as nn
import torch.optim as optim
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils

parser = argparse.ArgumentParser()
parser.add_argument("--dataroot", required=True, help="path to the images")
parser.add_argument("--batchSize", type=int, default=64, help="input batch size")
parser.add_argument("--niter", type=int, default=25, help="number of epochs to train for")
parser.add_argument("--nz", type=int, default=100, help="size of the latent z vector")
parser.add_argument("--outf", default=".", help="folder to output images and model checkpoints")
opt = parser.parse_args()

dataset = dset.ImageFolder(
    root=opt.dataroot,
    transform=transforms.Compose([transforms.Resize(64), transforms.ToTensor()]),
)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
netG = Generator(opt.nz).to(device)
netD = Discriminator().to(device)
criterion = nn.BCELoss()
fixed_noise = torch.randn(opt.batchSize, opt.nz, 1, 1, device=device)
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))

for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        netD.zero_grad()
        real_images = data[0].to(device)
        batch_size = real_images.size(0)
        label = torch.full((batch_size,), 1.0, dtype=real_images.dtype, device=device)
        output = netD(real_images)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(batch_size, opt.nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(0.0)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        label.fill_(1.0)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        print(
            "[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f"
            % (epoch, opt.niter, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2)
        )
        if i % 100 == 0:
            vutils.save_image(real_images, "%s/real_samples.png" % opt.outf, normalize=True)
            fake = netG(fixed_noise)
            vutils.save_image(fake.detach(), "%s/fake_samples_epoch_%03d.png" % (opt.outf, epoch), normalize=True)

    torch.save(netG.state_dict(), "%s/netG_epoch_%d.pth" % (opt.outf, epoch))
''',
    "sequence_lbfgs.py": '''\
"""Sine waves predicted by an LSTM trained with L-BFGS for a handful of steps, the loss printed in
the closure and after each step (shaped like the time-sequence prediction examples)."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=15, help="steps to run")
opt = parser.parse_args()
np.random.seed(0)
torch.manual_seed(0)
data = torch.load("traindata.pt")
train_input = torch.from_numpy(data[3:, :-1])
target = torch.from_numpy(data[3:, 1:])
test_input = torch.from_numpy(data[:3, :-1])
test_target = torch.from_numpy(data[:3, 1:])
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
for i in range(opt.steps):
    print("STEP: ", i)

    def closure():
        optimizer.zero_grad()
        out = seq(train_input)
        loss = criterion(out, target)
        print("loss:", loss.item())
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        future = 1000
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
        print("test loss:", loss.item())
        y = pred.detach().numpy()
''',
    "super_resolution.py": '''\
"""Super-resolution trained on a few hundred images: a handful of batches an epoch, each printed,
then a test pass and a checkpoint per epoch (shaped like the sub-pixel CNN examples)."""

import argparse

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser(description="Super Res Example")
parser.add_argument("--upscale_factor", type=int, required=True, help="super resolution upscale factor")
parser.add_argument("--batchSize", type=int, default=64, help="training batch size")
parser.add_argument("--nEpochs", type=int, default=2, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.01, help="Learning Rate. Default=0.01")
opt = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
train_set = get_training_set(opt.upscale_factor)
test_set = get_test_set(opt.upscale_factor)
training_data_loader = DataLoader(dataset=train_set, batch_size=opt.batchSize, shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, batch_size=10, shuffle=False)

model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    epoch_loss = 0
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)

        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()

        print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), loss.item()))

    print("===> Epoch {} Complete: Avg. Loss: {:.4f}".format(epoch, epoch_loss / len(training_data_loader)))


def test():
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            prediction = model(input)
            mse = criterion(prediction, target)
            avg_psnr += 10 * torch.log10(1 / mse.item())
    print("===> Avg. PSNR: {:.4f} dB".format(avg_psnr / len(testing_data_loader)))


def checkpoint(epoch):
    model_out_path = "model_epoch_{}.pth".format(epoch)
    torch.save(model, model_out_path)
    print("Checkpoint saved to {}".format(model_out_path))


for epoch in range(1, opt.nEpochs + 1):
    train(epoch)
    test()
    checkpoint(epoch)
''',
}


def _missing(command: list[str]) -> bool:
    return subprocess.run([*command[:3], "--version"], capture_output=True).returncode != 0


@pytest.mark.slow
@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_fixed_scripts_leave_the_formatter_nothing_to_change(formatter, tmp_path):
    command, line_length, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    (tmp_path / "pyproject.toml").write_text(f"[{section}]\nline-length = {line_length}\n")
    for name, source in SCRIPTS.items():
        (tmp_path / name).write_text(source)
    for fixture in sorted(FIXTURES.glob("*.py")):
        (tmp_path / fixture.name).write_bytes(fixture.read_bytes())
    subprocess.run([*command, "."], cwd=tmp_path, check=True, capture_output=True)
    before = {path.name: path.read_text() for path in tmp_path.glob("*.py")}

    fixed = subprocess.run(
        # (--show-hints: the fixes of the findings held back by default must keep the layout too)
        [sys.executable, "-m", "gpulint", "check", "--fix", "--unsafe-fixes", "--show-hints", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert fixed.returncode in (0, 1), fixed.stdout + fixed.stderr
    unchanged = {path.name for path in tmp_path.glob("*.py") if path.read_text() == before[path.name]}
    assert unchanged == NOTHING_TO_FIX, "each script but those has something to fix"

    check = subprocess.run([*command, "--check", "--diff", "."], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


# A chain laid out one method a line (the formatters' fluent layout, two methods or more) that a
# fix shortens to one method: `.to(device=...)` moves into the factory, and the formatters join
# what is left (`).to(dtype=...)`), dropping parentheses the layout no longer needs.  The safe fix.
FLUENT_CHAIN_SCRIPT = """\
import time

import torch

device = torch.device("cuda")


class Trainer:
    def train(self, text_encoder, loader, std_token_embedding, num_channels_latents, height, width):
        for step, batch in enumerate(loader):
            start = time.time()
            (
                text_encoder.text_model if hasattr(text_encoder, "text_model") else text_encoder
            ).embeddings.token_embedding.weight.data[self.train_ids] = (
                torch.zeros(
                    len(self.train_ids),
                    (
                        text_encoder.text_model if hasattr(text_encoder, "text_model") else text_encoder
                    ).config.hidden_size,
                )
                .to(device=self.device)
                .to(dtype=self.dtype)
                * std_token_embedding
            )
            latents = (
                torch.zeros(batch.shape[0], num_channels_latents, height // 8, width // 8, dtype=torch.float32)
                .to(device=self.device)
                .to(dtype=self.dtype)
            )
            noise = (
                torch.zeros(batch.shape[0], num_channels_latents, height // 8, width // 8)
                .to(device=self.device)
                .to(dtype=self.dtype)
            )
            print(step, latents.shape, noise.shape, time.time() - start)
"""


def _fixed_and_checked(tmp_path, command, pyproject: str, source: str, select: str, *fix: str) -> tuple[str, str]:
    """`source` (formatted first) fixed with `--fix` (the safe set, unless `fix` says more) in a
    project with `pyproject`: the fixed text, and what the formatter's check then says (empty when
    it finds nothing)."""
    (tmp_path / "pyproject.toml").write_text(pyproject)
    script = tmp_path / "train.py"
    script.write_text(source)
    subprocess.run([*command, "."], cwd=tmp_path, check=True, capture_output=True)
    before = script.read_text()
    fixed = subprocess.run(
        [sys.executable, "-m", "gpulint", "check", "--fix", *fix, "--no-cache", "--select", select, "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert fixed.returncode in (0, 1), fixed.stdout + fixed.stderr
    assert script.read_text() != before, "the fix applies"
    check = subprocess.run([*command, "--check", "--diff", "."], cwd=tmp_path, capture_output=True, text=True)
    return script.read_text(), "" if check.returncode == 0 else check.stdout + check.stderr


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_a_fix_that_shortens_a_fluent_chain_leaves_it_as_the_formatter_does(formatter, tmp_path):
    command, _, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    fixed, complaints = _fixed_and_checked(
        tmp_path, command, f"[{section}]\nline-length = 119\n", FLUENT_CHAIN_SCRIPT, "GL203"
    )
    assert ".to(device=self.device)" not in fixed
    assert complaints == ""


# An 80-column project (SpeechBrain's shapes): a fix lengthens a list argument of a call already
# one argument per line, and the content of an assigned value's own parentheses (a comparison).
# The formatters split the list one element a line and the comparison before its operator.
NARROW_SCRIPT = """\
import time

import torch

device = torch.device("cuda")


def pad_and_mask(xs, pad_size, lens_abs, fb_max_length):
    for x in xs:
        start = time.time()
        device = x.device
        x_padded = torch.cat(
            [x, torch.zeros(x.size(0), pad_size, x.size(-1)).to(device)],
            dim=1,
        )
        mask_lens = (
            torch.arange(fb_max_length).to(device)[None, :] < lens_abs[:, None]
        )
        print(x_padded.shape, mask_lens, time.time() - start)
"""


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_fixes_in_a_narrow_project_are_split_as_the_formatter_splits_them(formatter, tmp_path):
    command, _, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    fixed, complaints = _fixed_and_checked(
        tmp_path, command, f"[{section}]\nline-length = 80\n", NARROW_SCRIPT, "GL203"
    )
    assert "device=device)[None, :]" in fixed and "x.size(-1), device=device)" in fixed
    assert complaints == ""


# A 79-column project (PyG's limit): a copy a fix makes asynchronous inside a call whose result is
# sliced.  The formatters split at the `[` when the line up to it fits, else inside the call.
SLICED_SCRIPT = """\
import time

import torch
import torch.nn.functional as F

device = torch.device("cuda")


def train(model, loader, optimizer):
    for batch in loader:
        start = time.time()
        optimizer.zero_grad()
        y = batch.y[: batch.batch_size]
        y_hat = model(batch.x, batch.edge_index.to(device))[: batch.batch_size]
        y_all = model(batch.x, batch.edge_index.to(device), batch.edge_attr)[:9]
        loss = F.cross_entropy(y_hat, y) + y_all.sum()
        loss.backward()
        optimizer.step()
        print(loss, time.time() - start)
"""


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_a_fixed_call_whose_result_is_sliced_is_split_as_the_formatter_splits_it(formatter, tmp_path):
    command, _, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    fixed, complaints = _fixed_and_checked(
        tmp_path, command, f"[{section}]\nline-length = 79\n", SLICED_SCRIPT, "GL104", "--unsafe-fixes"
    )
    assert fixed.count("non_blocking=True") == 2
    assert complaints == ""


# SpeechBrain's shapes: the call a fix lengthens is an element of a list, inside a call, inside a
# comparison in parentheses -- every level already one item a line -- or the left operand of an
# element split before its operator.  Only that call is split.
NESTED_SCRIPT = """\
import time

import torch

device = torch.device("cuda")


def regions(labels, uniform_mat, n_shared, steps, grapheme_encoded_data, bos_index):
    for step in range(steps):
        start = time.time()
        irrelevant_regions = (
            torch.cat(
                [
                    uniform_mat,
                    torch.ones(uniform_mat.shape[0], n_shared).to(labels.device),
                ],
                dim=1,
            )
            == 1
        )
        phn_encoded = (
            torch.ones(len(grapheme_encoded_data), 1).to(grapheme_encoded_data.device)
            * bos_index,
            torch.ones(len(grapheme_encoded_data)).to(grapheme_encoded_data.device),
        )
        print(irrelevant_regions, phn_encoded, time.time() - start)
"""


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_a_fixed_item_deep_in_a_layout_one_item_a_line_is_split_as_the_formatter_splits_it(formatter, tmp_path):
    command, _, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    fixed, complaints = _fixed_and_checked(
        tmp_path, command, f"[{section}]\nline-length = 80\n", NESTED_SCRIPT, "GL203"
    )
    assert "device=labels.device" in fixed and ".to(" not in fixed
    assert complaints == ""


# PyG's shape: a copy a fix makes asynchronous inside a comprehension that closes the line.  The
# formatters put the content between the brackets on its own line, split before `for` and `if`.
COMPREHENSION_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


class Runner:
    def run(self, dataset, model, optimizer):
        train_loader = DataLoader(dataset, batch_size=32, pin_memory=True)
        for batch in train_loader:
            inputs = {k: v.to(self.device) for k, v in batch["input"].items()}
            masks = [m.to(self.device) for m in batch["masks"] if m.numel()]
            loss = model(inputs, masks)
            loss.backward()
            optimizer.step()
"""


@pytest.mark.parametrize("formatter", sorted(FORMATTERS))
def test_a_fixed_comprehension_is_split_as_the_formatter_splits_it(formatter, tmp_path):
    command, _, section = FORMATTERS[formatter]
    if _missing(command):
        pytest.skip(f"{formatter} is not installed (the dev extra)")
    fixed, complaints = _fixed_and_checked(
        tmp_path, command, f"[{section}]\nline-length = 79\n", COMPREHENSION_SCRIPT, "GL104", "--unsafe-fixes"
    )
    assert fixed.count("non_blocking=True") == 2
    assert complaints == ""
