"""Shared set-up for the integration tests: a temporary git repository with a two-commit history."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers import run_cli  # noqa: F401 - the integration tests import it from here

BASE_SCRIPT = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder  # (its items decode files: the loaders' cost)

    def train(dataset, model, optimizer):
        loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
        model.cuda()
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda(non_blocking=True), y)
            loss.backward()
            optimizer.step()
            print(loss.item())  # already on the base branch: not the change's fault


    if __name__ == "__main__":
        train(ImageFolder("data"), *build())
    """
)

# The change (asserted below to have happened): one new loader (fixable findings), one new host sync
# (no fix) on the line that uses the loader, lines shifted by one.
CHANGED_SCRIPT = BASE_SCRIPT.replace(
    "    model.cuda()\n",
    "    val_loader = DataLoader(dataset, batch_size=64)\n    model.cuda()\n",
).replace(
    "        print(loss.item())  # already on the base branch: not the change's fault\n",
    "        print(loss.item())  # already on the base branch: not the change's fault\n"
    "        total = loss.item() + blend(val_loader)\n",
)

assert CHANGED_SCRIPT.count("\n") == BASE_SCRIPT.count("\n") + 2


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def review_repo(tmp_path, monkeypatch) -> Path:
    """A repository whose `main` has the base script and whose `feature` branch (checked out)
    adds lines to it; the current directory is the repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for key in ("GITHUB_BASE_REF", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(key, raising=False)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "dev")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "train.py").write_text(BASE_SCRIPT)
    (repo / "notes.txt").write_text("not python\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "train.py").write_text(CHANGED_SCRIPT)
    (repo / "notes.txt").write_text("not python\nstill not\n")
    git(repo, "commit", "-q", "-am", "change")
    monkeypatch.chdir(repo)
    return repo
