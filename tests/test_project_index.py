"""The project index: summaries of modules, what follows across them, and each module's view --
and the findings a view makes appear in the module it is about."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from gpulint.linter.analysis import facts
from gpulint.linter.analysis.project import EMPTY_VIEW, ModuleSummary, ModuleView, summarize
from gpulint.linter.config import Settings
from gpulint.linter.engine import Linter
from gpulint.linter.rule import MOSTLY_NOT_WANTED
from gpulint.linter.run import project as project_module
from gpulint.linter.run import stamps
from gpulint.linter.run.project import RunIndex, module_identity
from tests.helpers import run_cli

UTILS = """
import time
import torch
from torch.utils.data import DataLoader


def clip_gradients(model):
    norms = []
    for p in model.parameters():
        norms.append(p.grad.norm().item())
    return norms


def evaluate(model, loader):
    return [model(x).mean().item() for x in loader]


class Meter:
    def update(self, n):
        self.seen = time.perf_counter()


def make_loaders(ds):
    train = DataLoader(ds, num_workers=4, pin_memory=True)
    test = DataLoader(ds, num_workers=4, pin_memory=True)
    return train, test


def to_device(batch, device):
    return batch.to(device, non_blocking=True)
"""

TRAIN = """
import torch
import utils
from utils import make_loaders
from steps import train_step

model = Net().cuda()
meter = utils.Meter()
train_loader, test_loader = make_loaders(dataset)
for epoch in range(3):
    for step, batch in enumerate(train_loader):
        loss = model(batch.cuda(non_blocking=True)).mean()
        loss.backward()
        optimizer.step()
        utils.clip_gradients(model)
        meter.update(1)
        torch.cuda.synchronize()
        if step % 100 == 0:
            utils.evaluate(model, val_loader)
utils.evaluate(model, test_loader)
"""

STEPS = """
import torch


def train_step(model, batch, optimizer):
    loss = model(batch).mean()
    loss.backward()
    optimizer.step()
    return loss
"""

LOOP = """
import torch
from steps import train_step

model = Net().cuda()
for batch in loader:
    loss = train_step(model, batch, optimizer)
    print(loss.item())
"""


def write_project(root: Path, **modules: str) -> dict[str, Path]:
    paths = {}
    for name, code in modules.items():
        path = root / f"{name}.py"
        path.write_text(textwrap.dedent(code).lstrip())
        paths[name] = path
    return paths


@pytest.fixture
def project(tmp_path):
    paths = write_project(tmp_path, utils=UTILS, train=TRAIN, steps=STEPS, loop=LOOP)
    return paths, RunIndex([paths["train"], paths["utils"], paths["steps"], paths["loop"]])


def test_a_helper_another_module_runs_per_step_and_not_one_it_runs_under_an_interval(project):
    paths, index = project
    view = index.view(paths["utils"])
    assert "clip_gradients" in view.per_step and "Meter.update" in view.per_step
    assert "evaluate" not in view.per_step  # under `step % 100 == 0`
    assert "make_loaders" not in view.per_step  # called once, before the loop


def test_a_helper_called_under_an_interval_helper_of_the_callers_module_is_not_per_step(tmp_path):
    # The caller throttles with its own `divisible_by(step, n)` (a diffusion trainer's FID every
    # `save_and_sample_every` steps): the evaluation it calls runs on those steps only.
    trainer = """
    import torch
    import fid


    def divisible_by(numer, denom):
        return (numer % denom) == 0


    for step in range(steps):
        loss = model(next(dl)).mean()
        loss.backward()
        opt.step()
        fid.clip(model)
        if step != 0 and divisible_by(step, every):
            fid.fid_score(model)
    """
    helper = """
    def fid_score(model):
        return model.features().cpu()


    def clip(model):
        return model.grad_norm().item()
    """
    paths = write_project(tmp_path, trainer=trainer, fid=helper)
    view = RunIndex([paths["trainer"], paths["fid"]]).view(paths["fid"])
    assert "clip" in view.per_step and "fid_score" not in view.per_step


def test_an_interval_helper_defined_below_the_loop_that_calls_it_guards_too(tmp_path):
    # (the summary learns which functions are interval helpers while it walks the module once:
    # an `if` above the helper's definition is decided at the end of the walk)
    trainer = """
    import torch
    import fid


    def train(model, dl, opt, steps, every):
        for step in range(steps):
            loss = model(next(dl)).mean()
            loss.backward()
            opt.step()
            fid.clip(model)
            if divisible_by(step, every):
                fid.fid_score(model)
            if throttled(step):
                fid.sample(model)


    def divisible_by(numer, denom):
        return (numer % denom) == 0


    def throttled(step):
        def every(n):
            return step % n == 0
        return every(100)
    """
    helper = """
    def fid_score(model):
        return model.features().cpu()


    def sample(model):
        return model.sample().cpu()


    def clip(model):
        return model.grad_norm().item()
    """
    paths = write_project(tmp_path, trainer=trainer, fid=helper)
    view = RunIndex([paths["trainer"], paths["fid"]]).view(paths["fid"])
    assert "clip" in view.per_step
    assert "fid_score" not in view.per_step
    assert "sample" not in view.per_step  # (a function whose nested function returns the condition)


def test_what_a_module_learns_about_the_project_functions_it_calls(project):
    paths, index = project
    train = index.view(paths["train"])
    assert train.callee("meter.update").reads_clock
    assert train.callee("make_loaders").returns == ("dataloader",)
    assert train.callee("utils.evaluate") is None  # nothing to tell
    assert index.view(paths["loop"]).callee("train_step").steps
    assert index.view(paths["utils"]).reiterated == {("make_loaders", 0)}  # the test loader is used once


def test_a_module_learns_the_option_defaults_of_a_parser_another_module_builds(tmp_path):
    parser = """
    import argparse


    def get_argument_parser():
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=1)
        parser.add_argument("--num-workers", dest="workers", type=int, default=16)
        parser.add_argument("--lr", type=float, default=0.1)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--seed", type=int, default=7)
        return parser
    """
    train = "from options import get_argument_parser\nargs = get_argument_parser().parse_args()\n"
    paths = write_project(tmp_path, options=parser, train=train)
    view = RunIndex(list(paths.values())).view(paths["train"])
    # only integer defaults; one declared with two defaults is not known
    assert view.options_elsewhere == {"epochs": 1, "workers": 16}
    assert ModuleView.from_data(view.to_data()) == view
    # options say nothing about torch or training steps: rules this module's code rules out stay out
    assert not view.may_make_hold(facts.STEPS.name) and not view.may_make_hold(facts.TORCH.name)


def test_a_module_nothing_elsewhere_says_anything_about_has_an_empty_view(tmp_path):
    paths = write_project(tmp_path, utils=UTILS, train=TRAIN, steps=STEPS, plain="import torch\nx = torch.ones(3)\n")
    index = RunIndex(list(paths.values()))
    view = index.view(paths["plain"])
    assert not view and view.digest() == ""
    # The digest (part of a module's cache key) depends on the facts alone, not on the run.
    again = RunIndex(list(reversed(paths.values())))
    assert index.view(paths["train"]).digest() == again.view(paths["train"]).digest() != ""


def test_imported_project_modules_are_followed_when_the_run_names_one_file(tmp_path):
    paths = write_project(tmp_path, utils=UTILS, train=TRAIN, steps=STEPS)
    index = RunIndex([paths["train"]])
    assert "clip_gradients" in index.view(paths["utils"]).per_step


def test_packages_and_relative_imports_resolve_under_their_source_root(tmp_path):
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("import torch\n\ndef log(loss):\n    print(loss.item())\n")
    (package / "loop.py").write_text(
        "import torch\nfrom .helpers import log\n\nfor b in loader:\n    loss = model(b)\n    loss.backward()\n"
        "    opt.step()\n    log(loss)\n"
    )
    assert module_identity(package / "loop.py")[1] == "trainer.loop"
    index = RunIndex([package / "loop.py"])
    assert index.view(package / "helpers.py").per_step == {"log"}


def _module_file_by_stat(root: Path, dotted: str) -> Path | None:
    """What a lookup finds, asked of the file system one candidate at a time (the reference)."""
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_a_modules_file_is_found_as_the_file_system_says_reading_each_folder_once(tmp_path, monkeypatch):
    root = tmp_path / "src"
    for relative in ("pkg/__init__.py", "pkg/utils.py", "pkg/sub/__init__.py", "pkg/sub/deep.py", "nsp/mod.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("")
    (root / "pkg" / "odd.py").mkdir()  # a folder named like a module file is not one
    (root / "pkg" / "nested").mkdir()  # a folder without an __init__.py is no package
    (root / "linked.py").symlink_to(root / "pkg" / "utils.py")
    (root / "dangling.py").symlink_to(root / "missing.py")
    (root / "pkg" / "loop").symlink_to(root / "pkg" / "loop")  # a link to itself
    names = [
        "pkg", "pkg.utils", "pkg.sub", "pkg.sub.deep", "pkg.sub.missing", "pkg.odd", "pkg.nested", "nsp",
        "nsp.mod", "linked", "dangling", "pkg.loop", "pkg.loop.x", "missing.pkg", "pkg.utils.attr", "torch.nn",
    ]  # fmt: skip
    listed: list[str] = []
    scandir = project_module.os.scandir
    monkeypatch.setattr(project_module.os, "scandir", lambda path: listed.append(path) or scandir(path))
    folders = project_module.Folders()
    for name in names:
        found = project_module._module_file(str(root), name, folders)
        assert (Path(found) if found else None) == _module_file_by_stat(root, name), name
    assert sorted(listed) == sorted(set(listed))  # (each folder listed once)
    assert str(root / "pkg" / "sub") in listed and str(root / "torch") not in listed


def _made_long_ago(*folders: Path) -> None:
    """Folders whose modification time is an hour old (their listings can be trusted at once)."""
    for folder in folders:
        os.utime(folder, ns=(time.time_ns() - 3600 * 10**9,) * 2)


def test_the_next_index_keeps_only_the_listings_of_folders_that_did_not_change(tmp_path, monkeypatch):
    monkeypatch.setattr(stamps, "RACY_MARGIN_NS", 0)  # (the status-change time of a new folder is now)
    still, changed = tmp_path / "still", tmp_path / "changed"
    for folder in (still, changed):
        folder.mkdir()
        (folder / "a.py").write_text("")
    _made_long_ago(still, changed)
    first = project_module.Folders()
    assert first.has_file(str(still), "a.py") and first.has_file(str(changed), "a.py")
    (changed / "b.py").write_text("")  # (a new entry: the folder's modification time is now)
    listed: list[str] = []
    scandir = project_module.os.scandir
    monkeypatch.setattr(project_module.os, "scandir", lambda path: listed.append(path) or scandir(path))
    kept = first.unchanged()
    assert kept.has_file(str(still), "a.py") and kept.has_file(str(changed), "b.py")
    assert listed == [str(changed)]


def test_a_folder_changed_just_before_it_was_listed_is_listed_again(tmp_path, monkeypatch):
    folder = tmp_path / "fresh"
    folder.mkdir()
    # A file system whose clock ticks too coarsely to tell the listing from the write after it:
    # the folder's stat data, changed just now, stays the same.
    tick = time.time_ns()
    monkeypatch.setattr(project_module, "stamp_of", lambda path: (0, tick, 1, tick))
    first = project_module.Folders()
    assert not first.has_file(str(folder), "late.py")
    (folder / "late.py").write_text("")
    assert first.unchanged().has_file(str(folder), "late.py")


def test_an_edit_sees_a_module_created_since_the_last_index(tmp_path, monkeypatch):
    monkeypatch.setattr(stamps, "RACY_MARGIN_NS", 0)
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    (package / "__init__.py").write_text("")
    loop = package / "loop.py"
    loop.write_text(
        "import torch\nfrom trainer.helpers import log\n\nfor b in loader:\n    loss = model(b)\n"
        "    loss.backward()\n    opt.step()\n    log(loss)\n"
    )
    _made_long_ago(package, package.parent, tmp_path)
    first = RunIndex([loop], project=[loop])
    assert first.view(package / "helpers.py") is EMPTY_VIEW  # (no such module yet)
    (package / "helpers.py").write_text("def log(loss):\n    print(loss.item())\n")
    again = RunIndex([loop], project=[loop], previous=first)  # (found through the import: a folder listing)
    assert again.view(package / "helpers.py").per_step == {"log"}


@pytest.fixture
def edited_project(tmp_path, monkeypatch):
    """An editor's project: `loop.py` (the open document) runs `helpers.log` every step; every file
    and folder last changed an hour ago; the files the index reads from disk are listed."""
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    (package / "__init__.py").write_text("")
    helpers = package / "helpers.py"
    helpers.write_text("def log(loss):\n    print(loss.item())\n")
    loop = package / "loop.py"
    loop.write_text("from trainer.helpers import log\n\nfor b in loader:\n    loss.backward()\n    log(loss)\n")
    _made_long_ago(*package.iterdir(), package, package.parent)
    read: list[Path] = []
    read_source = project_module.read_source
    monkeypatch.setattr(project_module, "read_source", lambda path: read.append(path) or read_source(path))
    return loop, helpers, read


def _edit(loop: Path, previous: RunIndex | None = None) -> RunIndex:
    document = {loop: loop.read_bytes() + b"# typed\n"}  # (the editor's text, not on disk)
    return RunIndex([loop], project=[loop, loop.parent / "helpers.py"], sources=document, previous=previous)


def test_an_edit_reads_again_only_the_files_that_changed_on_disk(edited_project, monkeypatch):
    monkeypatch.setattr(stamps, "RACY_MARGIN_NS", 0)
    loop, helpers, read = edited_project
    first = _edit(loop)
    assert helpers in read and first.view(helpers).per_step == {"log"}
    read.clear()
    again = _edit(loop, first)
    assert read == [] and again.view(helpers).per_step == {"log"}
    helpers.write_text("def other(loss):\n    print(loss.item())\n")  # (saved by another program)
    third = _edit(loop, again)
    assert read == [helpers] and third.view(helpers).per_step == frozenset()


def test_a_file_changed_just_before_it_was_read_is_read_again(edited_project):
    loop, helpers, read = edited_project
    helpers.write_text("def log(loss):\n    print(loss)\n")  # (just now: the clock may not tell the next write)
    first = _edit(loop)
    read.clear()
    _edit(loop, first)
    assert helpers in read


def _identity_by_stat(path: Path) -> tuple[str, str, bool]:
    """A module's identity, asked of the file system one `__init__.py` at a time (the reference)."""
    package = path.name == "__init__.py"
    parts = [] if package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return f"{folder}|{'.'.join(parts)}", ".".join(parts), package


def test_a_modules_identity_is_what_the_file_system_says(tmp_path):
    package = tmp_path / "proj" / "trainer" / "loops"
    package.mkdir(parents=True)
    for folder in (package, package.parent):
        (folder / "__init__.py").write_text("")
    (package / "epoch.py").write_text("")
    (tmp_path / "proj" / "script.py").write_text("")  # (a folder without __init__.py: its own root)
    (package.parent / "__init__.py").rename(package.parent / "__init__.py.bak")  # a package above none
    (package.parent / "__init__.py").mkdir()  # (a folder named like one is not one)
    folders = project_module.Folders()
    for path in (package / "epoch.py", package / "__init__.py", tmp_path / "proj" / "script.py"):
        assert module_identity(path, folders) == _identity_by_stat(path), path
    assert module_identity(package / "epoch.py", folders) == (f"{package.parent}|loops.epoch", "loops.epoch", False)


def test_summaries_go_through_plain_data_and_refuse_anything_else():
    summary = summarize(textwrap.dedent(UTILS).encode(), "utils")
    again = ModuleSummary.from_data(summary.to_data())
    assert again == summary
    assert ModuleSummary.from_data({"version": 0}) is None
    assert ModuleSummary.from_data({"version": summary.to_data()["version"], "functions": "x"}) is None
    assert summarize(b"def broken(:\n", "m") is None


def findings(path: Path, view=EMPTY_VIEW, select=("ALL",)) -> list[tuple[str, int]]:
    linter = Linter(Settings(select=list(select)))
    result = linter.lint_source(path.read_bytes(), path.name, project=view)
    return [(f.code, f.location.row) for f in result.findings]


def test_the_view_makes_findings_appear_in_the_module_it_is_about(project):
    paths, index = project
    # utils.py alone takes no step: nothing there is per step.  With the index, the `.item()` in
    # `clip_gradients` runs on every step of train.py, and `make_loaders`' first loader is
    # iterated every epoch there.
    assert findings(paths["utils"], select=("GL201", "GL103")) == []
    with_index = findings(paths["utils"], index.view(paths["utils"]), select=("GL201", "GL103"))
    assert ("GL201", 9) in with_index and ("GL103", 23) in with_index
    assert ("GL201", 14) not in with_index and ("GL103", 24) not in with_index


def test_a_step_function_of_another_module_makes_a_step_loop_here(project):
    paths, index = project
    assert findings(paths["loop"], select=("GL201",)) == []
    assert findings(paths["loop"], index.view(paths["loop"]), select=("GL201",)) == [("GL201", 7)]


def test_a_clock_read_by_a_helper_of_another_module_makes_a_timing_loop(project):
    paths, index = project
    assert ("GL204", 16) in findings(paths["train"], select=("GL204",))
    assert findings(paths["train"], index.view(paths["train"]), select=("GL204",)) == []


TIMED_LOOP = """
import torch
from meters import {cls}

{name} = {cls}()
for batch in loader:
    model(batch).sum().backward()
    optimizer.step()
    torch.cuda.synchronize()
    ips = {name}.update(len(batch))
"""
METERS = """
import time


class PerformanceMeter:
    def update(self, n):
        return n / (time.time() - self.start)


class MetricLogger:
    def update(self, n):
        self.count += n
"""


@pytest.mark.parametrize(
    "cls, name, timed", [("PerformanceMeter", "perf_meter", True), ("MetricLogger", "metric_logger", False)]
)
def test_a_timer_right_after_a_synchronize_is_known_by_its_code_or_without_it_by_its_name(tmp_path, cls, name, timed):
    paths = write_project(tmp_path, meters=METERS, train=TIMED_LOOP.format(cls=cls, name=name))
    expected = [] if timed else [("GL204", 8)]
    # Alone, train.py cannot see the meter's code: the name of the call right after the
    # synchronize says whether a timer reads the time it waited for.  With the index, its code does.
    assert findings(paths["train"], select=("GL204",)) == expected
    index = RunIndex([paths["train"], paths["meters"]])
    assert findings(paths["train"], index.view(paths["train"]), select=("GL204",)) == expected


def test_the_cli_indexes_the_project_unless_told_not_to(project, capsys, monkeypatch):
    paths, _ = project
    monkeypatch.chdir(paths["utils"].parent)
    code, out, _ = run_cli(["check", "--no-cache", "--select", "GL201", "--exit-zero", "utils.py", "train.py"], capsys)
    assert code == 0 and "utils.py:9:" in out
    code, out, _ = run_cli(
        ["check", "--no-cache", "--no-project-index", "--select", "GL201", "utils.py", "train.py"], capsys
    )
    assert code == 0 and "utils.py" not in out


DATASETS = """
import torch
from torch.utils.data import Dataset


class PairsInMemory(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


class FilesOnDisk(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, index):
        return torch.load(self.paths[index])
"""

TORCHRUN = """
import torch
from torch.distributed import init_process_group
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from datasets import FilesOnDisk, PairsInMemory


def load_train_objs():
    train_set = PairsInMemory(2048)
    model = torch.nn.Linear(20, 1)
    return train_set, model


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))


def main():
    init_process_group(backend="nccl")
    dataset, model = load_train_objs()
    model = model.cuda()
    for loader in (prepare_dataloader(dataset, 32), DataLoader(FilesOnDisk(["a.pt"]), batch_size=4)):
        for x, y in loader:
            model(x.cuda()).sum().backward()


if __name__ == "__main__":
    main()
"""


def test_a_dataset_class_of_another_module_that_holds_its_tensors_is_in_memory(tmp_path):
    # A torchrun script over a list of (tensor, tensor) pairs built by a class of another module:
    # no workers to add (GL101) and nothing to pin (GL102); the class that reads files still is.
    paths = write_project(tmp_path, datasets=DATASETS, train=TORCHRUN)
    index = RunIndex([paths["train"]])
    assert index.view(paths["train"]).callee("PairsInMemory").returns == ("tensordataset",)
    # (an item of FilesOnDisk reads a file: evidence of a real cost, named in the finding)
    assert index.view(paths["train"]).callee("FilesOnDisk").returns == ("working dataset",)
    with_index = findings(paths["train"], index.view(paths["train"]), select=("GL101", "GL102"))
    assert with_index == [("GL101", 23), ("GL102", 23)]  # the FilesOnDisk loader only
    # GL101 and GL102 are hints by default: named, their findings show, the FilesOnDisk loader's with
    # only the rules' own reason (no missing-evidence hint), the PairsInMemory loader's with one
    linter = Linter(Settings(extend_select=["GL1", "GL101", "GL102"], ignore=["GL104"]))
    result = linter.lint_source(paths["train"].read_bytes(), "train.py", project=index.view(paths["train"]))
    evident = [f for f in result.findings if f.hint == MOSTLY_NOT_WANTED]
    assert [(f.code, f.location.row) for f in evident] == [("GL101", 23), ("GL102", 23)]
    assert all(f.hint is not None and f.location.row == 16 for f in result.findings if f not in evident)
    assert "an item of `FilesOnDisk` (another module) reads, decodes, transforms or tokenizes" in evident[0].message
    # Linted alone, neither dataset is visible: both loaders' findings are hints.
    without = Linter(Settings(select=["GL101", "GL102"])).lint_source(paths["train"].read_bytes(), "train.py")
    assert sorted((f.code, f.location.row) for f in without.findings if f.hint) == [
        ("GL101", 16),
        ("GL101", 23),
        ("GL102", 16),
        ("GL102", 23),
    ]


NESTED_TENSOR = """
class NestedTensor:
    def __init__(self, tensors, mask):
        self.tensors, self.mask = tensors, mask

    def to(self, device):
        return NestedTensor(self.tensors.to(device), self.mask.to(device))
"""

ENGINE = """
import torch


def train_one_epoch(model, loader, optimizer, device):
    for samples, targets in loader:
        samples = samples.to(device)
        loss = model(samples, targets)
        loss.backward()
        optimizer.step()
"""


def test_a_batch_class_of_another_module_whose_to_takes_no_non_blocking_keeps_the_copy_unfixed(tmp_path):
    # DETR's shape: the loader yields a `NestedTensor` whose own `to(self, device)` takes no
    # keyword, so `samples.to(device, non_blocking=True)` would raise TypeError on the first step.
    paths = write_project(tmp_path, misc=NESTED_TENSOR, engine=ENGINE)
    index = RunIndex([paths["engine"], paths["misc"]])
    view = index.view(paths["engine"])
    assert view.own_to_elsewhere == ("NestedTensor",)
    linter = Linter(Settings(select=["GL104"]))
    result = linter.lint_source(paths["engine"].read_bytes(), "engine.py", project=view)
    assert [(f.code, f.location.row, f.fix) for f in result.findings] == [("GL104", 6, None)]
    assert "`NestedTensor` of this project defines its own `to()` without `non_blocking`" in result.findings[0].message
    # Without that class in the project the copy is fixed.
    alone = linter.lint_source(paths["engine"].read_bytes(), "engine.py")
    assert [f.fix is not None for f in alone.findings] == [True]


GAN_MODELS = """
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, nz, ngf):
        super().__init__()
        self.main = nn.Sequential(nn.ConvTranspose2d(nz, ngf, 4, 1, 0), nn.BatchNorm2d(ngf), nn.Tanh())

    def forward(self, x):
        return self.main(x)


class Discriminator(nn.Module):
    def __init__(self, ndf):
        super().__init__()
        self.main = nn.Sequential(nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(0.2), nn.Sigmoid())

    def forward(self, x):
        return self.main(x)
"""

TRANSFORMER_MODELS = """
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 16, 16)
        self.attention = nn.MultiheadAttention(width, 8)

    def forward(self, x):
        return self.attention(x, x, x)[0]
"""

GAN_TRAINING = """
import torch
from models import {classes}


def main():
    netG, netD = {built}
    optimizer = torch.optim.Adam(netD.parameters())
    for real in loader:
        loss = netD(real.cuda()).mean() - netD(netG(noise)).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    "models, classes, built, fixed",
    [
        # DCGAN's shape: every network the script builds is another module's convolutions
        (GAN_MODELS, "Generator, Discriminator", "Generator(100, 64).cuda(), Discriminator(64).cuda()", False),
        # a network of another module that names attention: TF32 matmuls matter there
        (TRANSFORMER_MODELS, "Encoder", "Encoder(256).cuda(), Encoder(256).cuda()", True),
    ],
)
def test_a_script_that_trains_convolutional_networks_of_another_module_gets_no_tf32_fix(
    tmp_path, models, classes, built, fixed
):
    paths = write_project(tmp_path, models=models, train=GAN_TRAINING.format(classes=classes, built=built))
    view = RunIndex([paths["train"], paths["models"]]).view(paths["train"])
    assert view.networks_elsewhere == (("convolution",) if not fixed else ("attention",))
    result = Linter(Settings(select=["GL404"])).lint_source(paths["train"].read_bytes(), "train.py", project=view)
    assert [(f.code, f.fix is not None) for f in result.findings] == [("GL404", fixed)]
    if not fixed:
        assert "(no fix: a convolutional network" in result.findings[0].message
    # linted alone, the networks are unknown: the fix is offered
    alone = Linter(Settings(select=["GL404"])).lint_source(paths["train"].read_bytes(), "train.py")
    assert [f.fix is not None for f in alone.findings] == [True]


QUIRKS = """
import torch


def allow_tf32():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
"""

RECIPE = """
import torch
import speech.quirks


def main():
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_where_a_module_of_the_projects_package_decides_tf32_no_second_switch_is_written(tmp_path):
    # SpeechBrain's shape: the library enables TF32 at import (and lets users opt out); a line in a
    # recipe would override that choice.
    (tmp_path / "speech").mkdir()
    (tmp_path / "speech" / "__init__.py").write_text("")
    paths = write_project(tmp_path, **{"speech/quirks": QUIRKS, "recipe": RECIPE})
    index = RunIndex([paths["recipe"], paths["speech/quirks"]])
    view = index.view(paths["recipe"])
    assert view.tf32_set_in.endswith("quirks.py")
    assert not view.makes_rules_fire  # (it only withholds a fix: the trigger filter is as before)
    result = Linter(Settings(select=["GL404"])).lint_source(paths["recipe"].read_bytes(), "recipe.py", project=view)
    assert [(f.code, f.fix) for f in result.findings] == [("GL404", None)]
    assert result.findings[0].message.endswith(f"(no fix: the project decides TF32 itself, in `{view.tf32_set_in}`)")
    # the module that decides it (and trains nothing) is told nothing
    assert index.view(paths["speech/quirks"]).tf32_set_in == ""
    summary = summarize(textwrap.dedent(QUIRKS).encode(), "speech.quirks")
    assert summary.sets_tf32 and ModuleSummary.from_data(summary.to_data()) == summary


def test_a_script_that_sets_tf32_for_itself_decides_nothing_for_the_scripts_beside_it(tmp_path):
    # A folder of examples: one script enables TF32 in its own main; its neighbour still gets the fix.
    tuned = RECIPE.replace("import speech.quirks\n", "").replace(
        "def main():\n", 'def main():\n    torch.set_float32_matmul_precision("high")\n'
    )
    paths = write_project(tmp_path, tuned=tuned, recipe=RECIPE.replace("import speech.quirks\n", ""))
    assert summarize(paths["tuned"].read_bytes(), "tuned").sets_tf32 is False
    view = RunIndex([paths["recipe"], paths["tuned"]]).view(paths["recipe"])
    assert view.tf32_set_in == ""
    result = Linter(Settings(select=["GL404"])).lint_source(paths["recipe"].read_bytes(), "recipe.py", project=view)
    assert [f.fix is not None for f in result.findings] == [True]


def test_the_views_of_a_project_read_the_whole_index_once_not_once_per_module():
    """What a view gathers from every module of its source root (the batch classes with their own
    `to()`, the modules that wrap a model, what other modules make per step) is grouped once: the
    views of N modules walked all N summaries each before (N * N: a tenth of the index's time on a
    tree of 2,000 modules), and the grouping says the same as that walk did."""
    from gpulint.linter.analysis.project import ProjectIndex

    class Counted(dict):
        walks = 0

        def items(self):
            Counted.walks += 1
            return super().items()

        def values(self):
            Counted.walks += 1
            return super().values()

    def batch(n: int) -> bytes:
        return f"class Batch{n}:\n    def to(self, device):\n        return self\n".encode()

    summaries = Counted({f"/src|pkg.batch_{n}": summarize(batch(n), f"pkg.batch_{n}", False) for n in range(30)})
    summaries["/src|pkg.again"] = summarize(batch(0), "pkg.again", False)  # (a second module with Batch0)
    summaries["/src|tests.test_batch"] = summarize(batch(99), "tests.test_batch", False)
    summaries["/other|lib"] = summarize(batch(77), "lib", False)
    index = ProjectIndex(summaries, test_modules=frozenset({"/src|tests.test_batch"}))
    built = Counted.walks
    views = {module_id: index.view(module_id) for module_id in summaries}
    assert Counted.walks == built, "a view walked every module"
    everything = tuple(sorted(f"Batch{n}" for n in range(30)))
    assert views["/src|pkg.batch_5"].own_to_elsewhere == tuple(name for name in everything if name != "Batch5")
    assert views["/src|pkg.batch_0"].own_to_elsewhere == everything  # (pkg.again has a Batch0 too)
    assert views["/src|tests.test_batch"].own_to_elsewhere == everything  # (a test's own class is not counted)
    assert views["/other|lib"].own_to_elsewhere == ()  # (another source root)


@pytest.mark.parametrize(
    "source, kinds",
    [
        (
            "from torch.nn import Conv2d as C\n\nclass Net:\n    def __init__(self):\n        self.c = C(3, 8, 3)\n",
            {"Net": "convolution"},
        ),  # (the layer's name is spelled in the import only)
        (
            "import torch.nn.functional as F\n\nclass Net:\n    def forward(self, x):\n        return F.conv1d(x, w)\n",
            {"Net": "convolution"},
        ),
        ("class Block:\n    def __init__(self, mha: 'MultiHeadAttention'):\n        self.att = Multi()\n", {}),
        ("class Block:\n    def __init__(self):\n        self.att = SelfAttention()\n", {"Block": "attention"}),
        (
            "import torch\n\nclass Head:\n    def __init__(self):\n        self.fc = torch.nn.Linear(3, 4)  # conv\n",
            {},
        ),
        # (Python reads identifiers in NFKC form: `ſ` is `s` in the tree, not in the bytes)
        ("class Block:\n    def __init__(self):\n        self.att = Tranſformer()\n", {"Block": "attention"}),
    ],
    ids=["aliased-import", "functional", "annotation-text-only", "attention", "neither", "nfkc"],
)
def test_a_summary_records_the_kind_of_each_network_class(source, kinds):
    summary = summarize(source.encode(), "nets")
    assert summary is not None and summary.network_kinds == kinds
