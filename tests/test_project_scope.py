"""The same answer whatever paths a run names: the project index covers the whole project a linted
file belongs to (its root: the nearest folder with a pyproject.toml or a .git), and each file is
linted with its own project's settings (line length, target PyTorch, configuration)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.helpers import run_cli

HELPERS = textwrap.dedent(
    """\
    import torch


    def log_loss(loss):
        print(loss.item())
    """
)
TRAIN = textwrap.dedent(
    """\
    import torch
    from helpers import log_loss

    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1000):
        loss = model(torch.randn(8, 4, device="cuda")).sum()
        loss.backward()
        optimizer.step()
        log_loss(loss)
    """
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose training loop, in train.py, calls a helper of helpers.py every step."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "helpers.py").write_text(HELPERS)
    (root / "train.py").write_text(TRAIN)
    return root


def findings(capsys, *args: str) -> list[tuple[str, str, int]]:
    """(file name, code, row) of each finding `gpulint --format json ARGS` reports, hints shown (the
    helper's per-step print, GL302, is a hint by default)."""
    code, out, err = run_cli(["check", "--format", "json", "--exit-zero", "--show-hints", *args], capsys)
    assert code == 0, err
    return sorted((Path(f["filename"]).name, f["code"], f["location"]["row"]) for f in json.loads(out))


def test_a_helper_linted_alone_gets_the_finding_the_projects_loop_gives_it(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    whole = findings(capsys, "--no-cache", ".")
    assert ("helpers.py", "GL302", 5) in whole
    alone = findings(capsys, "--no-cache", "helpers.py")
    assert alone == [f for f in whole if f[0] == "helpers.py"]  # and nothing about train.py, not named
    # From outside the project, and with the cache (cold, then warm): the same.
    monkeypatch.chdir(project.parent)
    assert findings(capsys, "project/helpers.py") == alone
    assert findings(capsys, "project/helpers.py") == alone
    # Another file of the project changes (the loop no longer calls the helper): the warm cache
    # does not answer with the old view.
    (project / "train.py").write_text(TRAIN.replace("    log_loss(loss)\n", ""))
    assert findings(capsys, "project/helpers.py") == []


def test_the_index_reads_what_a_run_over_the_root_would_lint(project, capsys, monkeypatch):
    """A caller that discovery skips (.gitignore) makes nothing per-step, from any entry point."""
    (project / ".gitignore").write_text("train.py\n")
    monkeypatch.chdir(project)
    assert findings(capsys, "--no-cache", "helpers.py") == []
    assert findings(capsys, "--no-cache", ".") == []


def test_a_file_outside_any_project_is_indexed_with_what_it_imports(tmp_path, capsys, monkeypatch):
    """No pyproject.toml or .git above: the run's files and the modules they import, as before."""
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "helpers.py").write_text(HELPERS)
    (loose / "train.py").write_text(TRAIN)
    monkeypatch.chdir(loose)
    assert findings(capsys, "--no-cache", "helpers.py") == []
    assert ("helpers.py", "GL302", 5) in findings(capsys, "--no-cache", "helpers.py", "train.py")


SCRIPT = textwrap.dedent(
    """\
    import torch

    scaler = torch.cuda.amp.GradScaler()
    for x in loader:
        y = model(x.to(device_name_that_is_long_enough, memory_format=torch.channels_last))
        y.sum().backward()
        opt.step()
    """
)


@pytest.fixture
def two_projects(tmp_path: Path) -> Path:
    """`default/`: line length 88, any PyTorch.  `pinned/`: line length 120 (ruff's), torch>=1.8,
    so no fix that needs torch 2.3 (`torch.amp.GradScaler("cuda")`)."""
    for name, pyproject in [
        ("default", "[project]\nname = 'a'\n"),
        ("pinned", "[project]\nname = 'b'\ndependencies = ['torch>=1.8']\n[tool.ruff]\nline-length = 120\n"),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text(pyproject)
        (tmp_path / name / "train.py").write_text(SCRIPT)
    return tmp_path


def _diffs(capsys, *args: str) -> dict[str, str]:
    """Each file's `--diff` (by its folder's name)."""
    code, out, err = run_cli(
        ["check", "--no-cache", "--select", "GL104,GL402", "--unsafe-fixes", "--diff", *args], capsys
    )
    assert code == 1, err
    parts = out.split("--- a/")[1:]
    return {part.split("/", 1)[0]: part for part in parts}


WIDE = "+    y = model(x.to(device_name_that_is_long_enough, memory_format=torch.channels_last, non_blocking=True))"


def test_each_project_is_linted_with_its_own_settings_in_one_run(two_projects, capsys, monkeypatch):
    monkeypatch.chdir(two_projects)
    diffs = _diffs(capsys, "default", "pinned/train.py")
    assert 'torch.amp.GradScaler("cuda")' in diffs["default"]  # no PyTorch limit
    assert WIDE not in diffs["default"] and "+            non_blocking=True," in diffs["default"]  # wrapped at 88
    assert "torch.amp.GradScaler" not in diffs["pinned"]  # torch>=1.8: the fix that needs 2.3 is not offered
    assert WIDE in diffs["pinned"]  # one line of 104 characters: within 120
    # Named in the other order, the same.
    assert _diffs(capsys, "pinned", "default/train.py") == diffs


def test_config_is_the_configuration_of_every_file(two_projects, capsys, monkeypatch):
    monkeypatch.chdir(two_projects)
    diffs = _diffs(capsys, "--config", "default/pyproject.toml", "default", "pinned/train.py")
    assert 'torch.amp.GradScaler("cuda")' in diffs["pinned"] and WIDE not in diffs["pinned"]


def test_a_broken_configuration_of_another_project_is_an_error(two_projects, capsys, monkeypatch):
    (two_projects / "pinned" / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GL9999"]\n')
    monkeypatch.chdir(two_projects)
    code, out, err = run_cli(["check", "--no-cache", "default", "pinned/train.py"], capsys)
    assert code == 2 and "GL9999" in err


def test_a_module_without_a_summary_is_remembered_as_such(tmp_path):
    """A module over the node budget (or that does not parse) has no summary: the cache says so,
    rather than the next run parsing it again; a summary under another budget is another entry."""
    from gpulint.linter.run.cache import ResultCache

    cache = ResultCache(tmp_path / "cache", "run")
    key = cache.summary_key("big", False, "hash", 10)
    assert cache.get_summary(key) == (False, None)
    cache.put_summary(key, None)
    assert cache.get_summary(key) == (True, None)
    assert cache.get_summary(cache.summary_key("big", False, "hash", None)) == (False, None)


def test_an_edit_that_changes_no_summary_reuses_the_solved_index(project):
    from gpulint.linter.run.project import RunIndex, project_files

    helpers = project / "helpers.py"
    others, _ = project_files([helpers], lambda root: ([], root))
    first = RunIndex([helpers], project=others)
    edited = HELPERS.replace("import torch\n", "import torch  # an edit\n").encode()
    again = RunIndex([helpers], project=others, sources={helpers: edited}, previous=first)
    assert again.index is first.index
    changed = HELPERS.replace("print(loss.item())", "return loss").encode()
    assert RunIndex([helpers], project=others, sources={helpers: changed}, previous=first).index is not first.index


def test_a_run_over_the_projects_root_walks_it_once(tmp_path, capsys, monkeypatch):
    # (the project index takes the run's own walk of the root: same folder, same patterns)
    from gpulint.linter.run import files
    from tests.helpers import run_cli

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text("import torch\n")
    (tmp_path / "util.py").write_text("import os\n")
    walked: list[str] = []
    walk = files._walk
    monkeypatch.setattr(files, "_walk", lambda top, *args: walked.append(str(top)) or walk(top, *args))
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["check", "--no-cache", "."], capsys)
    assert code == 0, err
    assert walked == ["."]
    walked.clear()
    code, _, err = run_cli(["check", "--no-cache", "pkg"], capsys)  # (a folder below the root: the root is walked)
    assert code == 0, err
    assert walked == ["pkg", str(tmp_path)]


def test_a_linked_file_belongs_to_the_project_of_the_file_it_links_to(tmp_path):
    # (the roots of the files of one folder are found once, by their folder; a symbolic link is not
    # in its folder's project but in its target's)
    from gpulint.linter.run.project import project_files

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
        (tmp_path / name / f"{name}_module.py").write_text("import torch\n")
    (tmp_path / "one" / "train.py").write_text("import torch\n")
    (tmp_path / "one" / "linked.py").symlink_to(tmp_path / "two" / "two_module.py")
    found, _ = project_files([tmp_path / "one" / "train.py", tmp_path / "one" / "linked.py"], lambda root: ([], root))
    assert sorted(path.name for path in found) == ["one_module.py", "train.py", "two_module.py"]


@pytest.fixture
def walked_tree(tmp_path, monkeypatch):
    """A project whose folders and .gitignore were last changed an hour ago, and a counter of the
    walks `project_files` makes of it."""
    import os
    import time

    from gpulint.linter.run import files

    for relative, text in (
        ("pyproject.toml", ""),
        (".gitignore", "ignored.py\n"),
        ("pkg/a.py", ""),
        ("pkg/ignored.py", ""),
        ("pkg/sub/b.py", ""),
        ("env/pyvenv.cfg", ""),
        ("env/lib.py", ""),
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    hour_ago = time.time_ns() - 3600 * 10**9
    for path in [tmp_path / ".gitignore", *(p for p in tmp_path.rglob("*") if p.is_dir()), tmp_path]:
        os.utime(path, ns=(hour_ago, hour_ago))
    walks: list[Path] = []
    walk = files._walk
    monkeypatch.setattr(files, "_walk", lambda top, *args: walks.append(top) or walk(top, *args))
    return tmp_path, walks


def _project(root: Path, remembered: dict) -> list[str]:
    from gpulint.linter.run.project import project_files

    found, _ = project_files([root / "pkg" / "a.py"], lambda r: ([], r), remembered=remembered)
    return sorted(path.relative_to(root).as_posix() for path in found)


def test_an_unchanged_project_is_not_walked_again_and_any_change_is_seen(walked_tree, monkeypatch):
    from gpulint.linter.run import stamps

    monkeypatch.setattr(stamps, "RACY_MARGIN_NS", 0)  # (the status-change times are recent: see the next test)
    root, walks = walked_tree
    remembered: dict = {}
    assert _project(root, remembered) == ["pkg/a.py", "pkg/sub/b.py"]
    assert _project(root, remembered) == ["pkg/a.py", "pkg/sub/b.py"] and len(walks) == 1
    (root / "pkg" / "sub" / "c.py").write_text("")  # a new file
    assert _project(root, remembered) == ["pkg/a.py", "pkg/sub/b.py", "pkg/sub/c.py"] and len(walks) == 2
    (root / ".gitignore").write_text("ignored.py\nc.py\n")  # a .gitignore edited in place
    assert _project(root, remembered) == ["pkg/a.py", "pkg/sub/b.py"] and len(walks) == 3
    (root / "env" / "pyvenv.cfg").unlink()  # no longer a virtual environment
    assert _project(root, remembered) == ["env/lib.py", "pkg/a.py", "pkg/sub/b.py"] and len(walks) == 4


def test_a_project_changed_just_before_its_walk_is_walked_again(walked_tree):
    root, walks = walked_tree
    (root / "pkg" / "sub" / "c.py").write_text("")  # (within two seconds: the clock may not tell the next change)
    remembered: dict = {}
    _project(root, remembered)
    _project(root, remembered)
    assert len(walks) == 2
