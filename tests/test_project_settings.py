"""What the project says that shapes fixes: its line length, the PyTorch it targets, and whether
test files get trainer-config and per-step fixes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gpulint.linter.config import ConfigError, Settings, load_settings
from gpulint.linter.engine import Linter
from gpulint.linter.fix.passes import fix_source
from gpulint.linter.project import lightning_lower_bound, tensorflow_lower_bound, torch_lower_bound
from tests.helpers import ROOT


@pytest.mark.parametrize(
    "requirements, bound",
    [
        (["torch>=2.1,<3"], (2, 1)),
        (["torch==1.13.1"], (1, 13)),
        (["torch ~= 2.2.0"], (2, 2)),
        (['torch>=2.0; python_version > "3.8"'], (2, 0)),
        (["torch[opt-einsum]>=2.4"], (2, 4)),
        (["numpy", "torch>=1.12", "torch>=2.1"], (2, 1)),  # the strictest lower bound
        (["torchvision>=0.15", "torch-xla>=2.0"], None),  # other packages
        (["torch"], None),  # no lower bound: no limit
        (["torch<2"], None),
    ],
)
def test_torch_lower_bound(requirements, bound):
    assert torch_lower_bound(requirements) == bound


@pytest.mark.parametrize(
    "requirements, bound",
    [
        (["tensorflow>=2.10,<2.16"], (2, 10)),
        (["tensorflow-cpu==2.12.0"], (2, 12)),
        (["tensorflow[and-cuda]>=2.15"], (2, 15)),
        (["tensorflow-datasets>=4.9", "tensorflow-addons>=0.20"], None),  # other packages
        (["tensorflow"], None),
    ],
)
def test_tensorflow_lower_bound(requirements, bound):
    assert tensorflow_lower_bound(requirements) == bound


def test_target_tensorflow_from_the_requirements_or_said_outright(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    (tmp_path / "requirements.txt").write_text("numpy\ntensorflow>=2.10\n")
    assert load_settings(None, tmp_path).target_tensorflow == (2, 10)
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gpulint]\ntarget-tensorflow = "2.15"\n')
    assert load_settings(config).target_tensorflow == (2, 15)
    config.write_text('[tool.gpulint]\ntarget-tensorflow = "new"\n')
    with pytest.raises(ConfigError, match="target-tensorflow"):
        load_settings(config)


@pytest.mark.parametrize(
    "requirements, bound",
    [
        (["pytorch-lightning>=1.6,<2"], (1, 6)),
        (["lightning==2.1.0"], (2, 1)),
        (["pytorch_lightning[extra]~=1.9.0"], (1, 9)),
        (["lightning-bolts>=0.7", "lightning-utilities>=0.9"], None),  # other packages
        (["pytorch-lightning"], None),
    ],
)
def test_lightning_lower_bound(requirements, bound):
    assert lightning_lower_bound(requirements) == bound


@pytest.mark.parametrize(
    "name, text",
    [
        ("requirements.txt", "torch>=1.10\npytorch-lightning>=1.5.0\n"),
        ("setup.py", 'setup(install_requires=["torch>=1.10", "pytorch_lightning>=1.5", "lightning-bolts"])\n'),
        ("environment.yml", "dependencies:\n  - pytorch=1.10\n  - pytorch-lightning=1.5.10\n"),
    ],
)
def test_the_lightning_floor_comes_from_the_projects_requirements(tmp_path, name, text):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    assert load_settings(None, tmp_path).target_lightning == (1, 5)


@pytest.mark.parametrize(
    "name, text, documented, where",
    [
        ("README.md", "## Requirements\n- Python 3.6\n- TensorFlow 2.0 or later\n", (2, 0), "README"),
        ("INSTALL.md", "pip install tensorflow-gpu>=1.14 tensorflow-datasets==4.0\n", (1, 14), "INSTALL.md"),
        ("docs/install.rst", "Tested with TF 2.1 and Keras 2.3.\n", (2, 1), "docs/install.rst"),
        ("README.md", "Uses tensorflow-datasets 4.9 and TFX 1.2 (tensorflow<3).\n", None, None),
    ],
)
def test_the_prose_names_the_tensorflow_it_runs_on(tmp_path, name, text, documented, where):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
    settings = load_settings(None, tmp_path)
    assert (settings.documented_tensorflow, settings.documented_tensorflow_in) == (documented, where)
    assert settings.target_tensorflow is None  # prose is not a requirement


def test_a_tensorflow_requirement_wins_over_the_prose(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("Runs on TensorFlow 1.15 and 2.x.\n")
    (tmp_path / "requirements.txt").write_text("tensorflow>=2.8\n")
    settings = load_settings(None, tmp_path)
    assert (settings.target_tensorflow, settings.documented_tensorflow) == ((2, 8), None)


def test_line_length_and_torch_come_from_the_pyproject_with_our_table(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[project]\ndependencies = ["torch>=1.13"]\n[tool.ruff]\nline-length = 100\n[tool.black]\nline-length = 79\n'
        "[tool.gpulint]\nfix-tests = true\n"
    )
    settings = load_settings(config)
    assert (settings.line_length, settings.target_torch, settings.fix_tests) == (100, (1, 13), True)


def test_target_torch_wins_over_the_requirements(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[project]\ndependencies = ["torch>=1.13"]\n[tool.gpulint]\ntarget-torch = "2.4"\n')
    assert load_settings(config).target_torch == (2, 4)


def test_without_our_table_the_nearest_pyproject_and_requirements_count(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 120\n")
    (tmp_path / "requirements.txt").write_text("numpy\ntorch==2.1.2\n")
    (tmp_path / "src").mkdir()
    settings = load_settings(None, tmp_path / "src")
    assert (settings.line_length, settings.target_torch, settings.fix_tests) == (120, (2, 1), False)
    assert Settings().line_length == 88 and Settings().target_torch is None


# The files that say a project's line length, and what gpulint reads from them: the formatter the
# pre-commit configuration runs, then a formatter's own setting, a formatter's default, a linter's.
LINE_LENGTH_SOURCES = {
    "ruff.toml": ({"ruff.toml": "line-length = 100\n"}, 100),
    ".ruff.toml over ruff.toml over [tool.ruff]": (
        {
            ".ruff.toml": "line-length = 101\n",
            "ruff.toml": "line-length = 100\n",
            "pyproject.toml": "[tool.ruff]\nline-length = 120\n",
        },
        101,
    ),
    "ruff.toml over [tool.black]": (
        {"ruff.toml": "line-length = 100\n", "pyproject.toml": "[tool.black]\nline-length = 79\n"},
        100,
    ),
    "ruff's format table alone: ruff's default, not the linter's limit": (
        {
            "pyproject.toml": '[tool.ruff.format]\nquote-style = "single"\n',
            ".flake8": "[flake8]\nmax-line-length = 100\n",
        },
        88,
    ),
    ".style.yapf": ({".style.yapf": "[style]\nbased_on_style = pep8\ncolumn_limit = 100\n"}, 100),
    "setup.cfg [yapf]": ({"setup.cfg": "[yapf]\ncolumn_limit = 90\n"}, 90),
    "[tool.yapf] pep8 style": ({"pyproject.toml": '[tool.yapf]\nbased_on_style = "pep8"\n'}, 79),
    "[tool.yapf] google style": ({"pyproject.toml": '[tool.yapf]\nbased_on_style = "google"\n'}, 80),
    # PyG: ruff lints at 80, yapf (the pre-commit hook that formats) keeps pep8's 79.
    "pre-commit yapf over [tool.ruff]": (
        {
            "pyproject.toml": '[tool.yapf]\nbased_on_style = "pep8"\n'
            '[tool.ruff]\nline-length = 80\n[tool.ruff.format]\nquote-style = "single"\n',
            ".pre-commit-config.yaml": "repos:\n  - repo: yapf\n    hooks:\n      - id: yapf\n"
            "  - repo: ruff-pre-commit\n    hooks:\n      - id: ruff\n",
        },
        79,
    ),
    "pre-commit ruff-format over [tool.black]": (
        {
            "pyproject.toml": "[tool.black]\nline-length = 100\n[tool.ruff]\nline-length = 80\n",
            ".pre-commit-config.yaml": "repos:\n- repo: r\n  hooks:\n  - id: ruff\n  - id: ruff-format\n",
        },
        80,
    ),
    "a commented-out hook runs nothing": (
        {
            "pyproject.toml": "[tool.black]\nline-length = 100\n",
            ".pre-commit-config.yaml": "repos:\n- repo: r\n  hooks:\n  # - id: yapf\n",
        },
        100,
    ),
    # fairseq: black at its default, whatever flake8 allows.
    "[tool.black] without a length over flake8": (
        {"pyproject.toml": "[tool.black]\nextend-exclude = 'x'\n", "setup.cfg": "[flake8]\nmax-line-length = 127\n"},
        88,
    ),
    ".flake8": ({".flake8": "[flake8]\nignore = W503\nmax-line-length = 100\n"}, 100),  # detectron2
    "tox.ini [flake8]": ({"tox.ini": "[flake8]\nmax-line-length = 120\n"}, 120),  # DETR
    "setup.cfg [flake8] max_line_length": ({"setup.cfg": "[flake8]\nmax_line_length = 127\n"}, 127),
    "[tool.flake8]": ({"pyproject.toml": "[tool.flake8]\nmax-line-length = 99\n"}, 99),
    "setup.cfg [pycodestyle]": ({"setup.cfg": "[pycodestyle]\nmax-line-length = 110\n"}, 110),
    "pylintrc [FORMAT]": ({"pylintrc": "[FORMAT]\nmax-line-length=80\nindent-string='  '\n"}, 80),  # tensor2tensor
    "[tool.pylint.format]": ({"pyproject.toml": "[tool.pylint.format]\nmax-line-length = 100\n"}, 100),
    "values of another shape say nothing": (
        {"pyproject.toml": '[tool.ruff]\nline-length = "wide"\n', "setup.cfg": "[flake8]\nmax-line-length = -3\n"},
        88,
    ),
    "an INI file that does not parse says nothing": ({"setup.cfg": "max-line-length = 100\n[flake8\n"}, 88),
}


@pytest.mark.parametrize("files, line_length", LINE_LENGTH_SOURCES.values(), ids=LINE_LENGTH_SOURCES)
def test_the_line_length_comes_from_where_the_project_keeps_it(tmp_path, files, line_length):
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert load_settings(None, tmp_path).line_length == line_length


@pytest.mark.parametrize("body, message", [('target-torch = "two"', "target-torch"), ("fix-tests = 1", "fix-tests")])
def test_bad_values_are_clear_errors(tmp_path, body, message):
    config = tmp_path / "pyproject.toml"
    config.write_text(f"[tool.gpulint]\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


def _fixable(settings: Settings, source: str, path: str = "train.py") -> list[str]:
    findings = Linter(settings).lint_source(textwrap.dedent(source).encode(), path).findings
    return sorted(f.code for f in findings if f.fix is not None)


AMP = """
    import torch
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        pass
"""


def test_fixes_that_need_a_newer_torch_than_the_target_are_not_offered():
    every = _fixable(Settings(select=["GL402"]), AMP)
    assert every == ["GL402", "GL402"]
    # torch 2.1: autocast's new form (2.0) yes, GradScaler's (2.3) no; the finding stays
    settings = Settings(select=["GL402"], target_torch=(2, 1))
    assert _fixable(settings, AMP) == ["GL402"]
    assert len(Linter(settings).lint_source(textwrap.dedent(AMP).encode(), "train.py").findings) == 2


@pytest.mark.parametrize(
    "name, text",
    [
        ("setup.py", 'from setuptools import setup\nsetup(name="x", install_requires=["numpy", "torch>=1.8,<2"])\n'),
        ("setup.cfg", "[options]\ninstall_requires =\n    numpy\n    torch>=1.8\n"),
        ("environment.yml", "name: x\ndependencies:\n  - python=3.8\n  - pytorch=1.8.1\n  - torchvision\n"),
        ("requirements.txt", "torch==1.8.1\n"),
    ],
)
def test_the_torch_floor_comes_from_every_requirements_file_even_without_a_pyproject(tmp_path, name, text):
    # A repository (a .git, no pyproject.toml) that states its torch floor in one of these files.
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    settings = load_settings(None, tmp_path / "train.py")
    assert settings.target_torch == (1, 8)
    assert _fixable(Settings(select=["GL402"], target_torch=settings.target_torch), AMP) == []


@pytest.mark.parametrize(
    "readme, documented",
    [
        ("Tested with PyTorch 1.8.1 and CUDA 11.1.", (1, 8)),
        ("## Requirements\n* torch>=1.10\n* torchvision 0.11\n", (1, 10)),
        ("Install `pytorch==1.13` first; torch.compile needs PyTorch 2.0 or later.", (1, 13)),
        ("- pytorch1.6.0+cu101\n- tensorboard 2.2.2", (1, 6)),
        ("Works with torchvision 0.9 (torch<3).", None),
        # a list of older releases' binaries is not what the project runs on
        ("Requires PyTorch 2.1.\nBinaries of older versions are also provided for PyTorch 1.4.0, 1.5.0.", (2, 1)),
    ],
)
def test_the_readme_names_the_torch_it_runs_on(tmp_path, readme, documented):
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text(readme)
    assert load_settings(None, tmp_path).documented_torch == documented


@pytest.mark.parametrize(
    "name, text, where",
    [
        # a project that checks its torch when it is installed, and says so in the message
        (
            "setup.py",
            'import torch\ntorch_ver = [int(x) for x in torch.__version__.split(".")[:2]]\n'
            'assert torch_ver >= [1, 8], "Requires PyTorch >= 1.8"\n',
            "setup.py",
        ),
        ("INSTALL.md", "## Requirements\n- PyTorch \u2265 1.8 and a matching torchvision.\n", "INSTALL.md"),
        ("README.md", "The code runs on PyTorch 1.8.1.\n", "README"),
    ],
)
def test_a_fix_that_needs_a_newer_torch_than_the_project_documents_is_withheld(tmp_path, name, text, where):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text, encoding="utf-8")
    settings = load_settings(None, tmp_path)
    assert (settings.documented_torch, settings.documented_torch_in) == ((1, 8), where)
    settings.select = ["GL402"]
    findings = Linter(settings).lint_source(textwrap.dedent(AMP).encode(), "train.py").findings
    assert len(findings) == 2 and all(f.fix is None for f in findings)  # reported, not fixed
    assert all(f"; the project's {where} names PyTorch 1.8)" in f.message for f in findings)
    assert all("(no fix: it needs PyTorch 2." in f.message for f in findings)


def test_a_folder_outside_any_repository_speaks_for_itself(tmp_path):
    # No pyproject.toml and no .git (an exported tree): the folder linted has the requirements.
    (tmp_path / "requirements.txt").write_text("torch>=1.9\n")
    (tmp_path / "train.py").write_text("import torch\n")
    assert load_settings(None, tmp_path).target_torch == (1, 9)
    assert load_settings(None, tmp_path / "train.py").target_torch == (1, 9)


def test_a_fix_that_needs_a_newer_torch_than_the_readme_names_is_withheld(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("# Pretraining\n\nThe code runs on PyTorch 1.8.1.\n")
    settings = load_settings(None, tmp_path)
    settings.select = ["GL402"]
    findings = Linter(settings).lint_source(textwrap.dedent(AMP).encode(), "train.py").findings
    assert len(findings) == 2 and all(f.fix is None for f in findings)
    assert all("the project's README names PyTorch 1.8" in f.message for f in findings)
    fixed = fix_source(Linter(settings), textwrap.dedent(AMP).encode(), "train.py", unsafe=True)
    assert fixed.source == textwrap.dedent(AMP).encode()  # not even `--unsafe-fixes` writes them
    # a requirement wins over the README: the fix needs 2.3, the requirement allows 2.1
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    required = load_settings(None, tmp_path)
    assert (required.target_torch, required.documented_torch) == ((2, 1), None)
    (tmp_path / "requirements.txt").unlink()
    # said outright, the target wins over the README
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\ntarget-torch = "2.4"\nselect = ["GL402"]\n')
    outright = load_settings(tmp_path / "pyproject.toml")
    assert outright.documented_torch is None
    findings = Linter(outright).lint_source(textwrap.dedent(AMP).encode(), "train.py").findings
    assert [f.fix.applicability.value for f in findings if f.fix] == ["safe", "safe"]


LOGGING_TEST = """
    import torch
    def test_training_logs_every_step():
        for step, batch in enumerate(loader):
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
            print(step, loss)
"""


@pytest.mark.parametrize(
    "path", ["tests/test_train.py", "test_train.py", "train_test.py", "conftest.py", "pkg/tests/helpers.py"]
)
def test_test_files_get_no_per_step_or_trainer_fixes_unless_asked(path):
    # (`lint-tests`: the findings are reported in test files at all; the fixes are what is tested)
    assert _fixable(Settings(select=["GL302"], lint_tests=True), LOGGING_TEST, path) == []
    assert _fixable(Settings(select=["GL302"], lint_tests=True, fix_tests=True), LOGGING_TEST, path) == ["GL302"]
    assert _fixable(Settings(select=["GL302"]), LOGGING_TEST, "train.py") == ["GL302"]
    trainer = "from transformers import TrainingArguments\na = TrainingArguments('o', logging_steps=1)\n"
    assert _fixable(Settings(select=["GL801"], lint_tests=True), trainer, path) == []
    assert _fixable(Settings(select=["GL801"], lint_tests=True, fix_tests=True), trainer, path) == ["GL801"]


def test_deprecated_amp_in_a_test_file_is_reported_without_a_fix_unless_asked():
    # A test may exercise the deprecated API on purpose: findings there, but `--fix` leaves them.
    findings = (
        Linter(Settings(select=["GL402"])).lint_source(textwrap.dedent(AMP).encode(), "tests/test_amp.py").findings
    )
    assert [f.code for f in findings] == ["GL402", "GL402"] and not any(f.fix for f in findings)
    assert _fixable(Settings(select=["GL402"], fix_tests=True), AMP, "tests/test_amp.py") == ["GL402", "GL402"]
    assert _fixable(Settings(select=["GL402"]), AMP, "train.py") == ["GL402", "GL402"]


def test_fixed_lines_wrap_at_the_projects_line_length():
    source = (
        b"import torch\ndevice = 'cuda'\nfor x in loader:\n"
        b"    y = model(x.to(device_name_that_is_long_enough, memory_format=torch.channels_last))\n"
        b"    y.sum().backward()\n    opt.step()\n"
    )
    wide = fix_source(Linter(Settings(select=["GL104"], line_length=120)), source, "t.py", unsafe=True).source.decode()
    narrow = fix_source(Linter(Settings(select=["GL104"])), source, "t.py", unsafe=True).source.decode()
    assert "memory_format=torch.channels_last, non_blocking=True))\n" in wide
    assert max(len(line) for line in narrow.splitlines()) <= 88


def _pyproject_reads(root, folders, capsys, monkeypatch) -> int:
    """How many times `gpulint check` over `root` reads the project's pyproject.toml."""
    from gpulint.linter import config
    from tests.helpers import run_cli

    (root / "pyproject.toml").write_text("[tool.gpulint]\nextend-select = ['GL401']\n")
    for folder in folders:
        (root / folder).mkdir(parents=True)
        (root / folder / "m.py").write_text("import os\n")
    reads: list[str] = []
    read_toml = config.read_toml
    monkeypatch.setattr(config, "read_toml", lambda path: reads.append(str(path)) or read_toml(path))
    monkeypatch.chdir(root)
    code, _, err = run_cli(["check", "--no-cache", "."], capsys)
    assert code == 0, err
    return reads.count(str(root / "pyproject.toml"))


def test_a_run_reads_the_pyproject_as_often_whatever_the_number_of_folders(tmp_path, capsys, monkeypatch):
    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    once = _pyproject_reads(tmp_path / "one", ["a"], capsys, monkeypatch)
    many = _pyproject_reads(tmp_path / "many", ["a", "b", "c/d", "c/e", "c/f/g"], capsys, monkeypatch)
    assert many == once  # (not once per folder linted)


def test_long_runs_in_the_projects_files_are_read_in_one_pass(tmp_path):
    """A README, requirements file or setup.py comes with the repository: a line of a megabyte of
    spaces between `torch` and what follows cost the patterns that read them one pass per way of
    sharing the spaces out (5 s at 8,000 spaces, hours at 400,000).  In a child process with a
    generous limit, so a regression fails instead of hanging the suite."""
    run = " " * 400_000  # (the files stay under the megabyte past which they are not read)
    clones = "git clone -b v2.1.0 " * 20_000  # (a build from source's tag, never the URL)
    (tmp_path / "README.md").write_text(f"Needs torch{run}x and torch version{run}x, PyTorch >= 1.8\n{clones}\n")
    (tmp_path / "requirements.txt").write_text(f"tensorflow{run}x\ntensorflow>=2.12\n")
    (tmp_path / "setup.py").write_text(
        'install_requires=["tensorflow' + "-a" * 200_000 + '\ninstall_requires=["torch>=1.9"]\n'
    )
    script = textwrap.dedent(f"""\
        from pathlib import Path
        from gpulint.linter.project import facts_from

        facts = facts_from({{}}, Path({str(tmp_path)!r}))
        print(facts.target_torch, facts.target_tensorflow)
    """)
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "(1, 9) (2, 12)\n"


def test_a_sub_projects_readme_that_builds_an_older_torch_withholds_the_newer_api(tmp_path):
    # A repository of examples whose sub-project builds PyTorch from a release tag: the custom_fwd
    # spelling of torch 2.4 would break the build its README documents, even under --unsafe-fixes.
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("# Examples\n")
    project = tmp_path / "training" / "Domino"
    (project / "model").mkdir(parents=True)
    (project / "README.md").write_text(
        "### Compile PyTorch from Source\n```\ngit clone -b v2.1.0 https://github.com/pytorch/pytorch.git\n```\n"
    )
    source = textwrap.dedent("""
        import torch
        from torch.cuda.amp import custom_fwd

        class Scatter(torch.autograd.Function):
            @staticmethod
            @custom_fwd
            def forward(ctx, x):
                return x
    """).lstrip()
    script = project / "model" / "layers.py"
    script.write_text(source)
    settings = load_settings(None, script)
    settings.select = ["GL402"]
    findings = Linter(settings).lint_source(source.encode(), str(script)).findings
    assert findings and all(f.fix is None for f in findings)
    assert all(
        "(no fix: it needs PyTorch 2.4; the project's `Domino/` README names PyTorch 2.1)" in f.message
        for f in findings
    )
    assert fix_source(Linter(settings), source.encode(), str(script), unsafe=True).source == source.encode()


def test_long_runs_in_the_lightning_and_tensorflow_prose_patterns_are_read_in_one_pass(tmp_path):
    """The same for the patterns that read the Lightning requirement and the TensorFlow a README
    or a page of docs/ names: runs of spaces after `lightning`, `tensorflow` and `TF`."""
    run = " " * 300_000  # (three to a file: under the megabyte past which it is not read)
    (tmp_path / "README.md").write_text(f"Needs tensorflow{run}x, TF{run}x and TF{run}9; TensorFlow 2.3\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "install.md").write_text(f"TF{run}>x tensorflow version{run}x\n")
    (tmp_path / "requirements.txt").write_text(f"pytorch-lightning{run}x\nlightning{run}\nlightning>=2.1\n")
    script = textwrap.dedent(f"""\
        from pathlib import Path
        from gpulint.linter.project import facts_from

        facts = facts_from({{}}, Path({str(tmp_path)!r}))
        print(facts.documented_tensorflow, facts.target_lightning)
    """)
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "(2, 3) (2, 1)\n"


@pytest.mark.parametrize(
    "name, text, framework",
    [
        ("pyproject.toml", '[project]\nname = "keras"\n', "Keras"),
        ("pyproject.toml", '[project]\nname = "Keras_Nightly"\n', "Keras"),  # (compared as pip compares names)
        ("setup.cfg", "[metadata]\nname = torch\n", "PyTorch"),
        (
            "setup.py",
            'from setuptools import setup\nsetup(\n    version="1.0",\n    name="pytorch-lightning",\n)\n',
            "Lightning",
        ),
        ("pyproject.toml", '[project]\nname = "keras-tuner"\n', None),  # a project that uses Keras
        # the framework's own documentation site: its guides show the API as users write it
        ("pyproject.toml", '[project]\nname = "tensorflow-docs"\n', "TensorFlow"),
        ("setup.py", "project_name = 'tensorflow-docs'\nsetup(\n    name=project_name,\n)\n", "TensorFlow"),
        ("setup.py", 'NAME = "keras"  # the distribution\nsetup(name=NAME, version=VERSION)\n', "Keras"),
        ("setup.py", "setup(name=NAME)\n", None),  # (a name read from elsewhere)
        ("pyproject.toml", '[project]\nname = "tensorflow-datasets"\n', None),
        ("setup.py", 'setup(name=f"{base}-keras")\n', None),
    ],
)
def test_the_framework_a_project_is_comes_from_its_distribution_name(tmp_path, name, text, framework):
    (tmp_path / name).write_text(text)
    assert load_settings(None, tmp_path).framework == framework


def test_a_top_level_folder_named_after_a_framework_is_not_the_framework(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "my-trainer"\n')
    (tmp_path / "keras").mkdir()
    (tmp_path / "keras" / "__init__.py").write_text("")
    assert load_settings(None, tmp_path).framework is None


KERAS_GUIDE = """\
import keras

model = keras.Sequential([keras.layers.Dense(10)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, epochs=1)
"""


def test_in_a_frameworks_own_repository_the_fixes_that_write_its_api_are_withheld(tmp_path):
    # Keras' own guides run on every backend; its PyTorch backend ignores `steps_per_execution`.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "keras"\n')
    guide = tmp_path / "guides" / "functional_api.py"
    guide.parent.mkdir()
    guide.write_text(KERAS_GUIDE)
    settings = load_settings(None, guide)
    settings.select = ["GL705"]
    findings = Linter(settings).lint_source(KERAS_GUIDE.encode(), str(guide)).findings
    assert [(f.code, f.fix) for f in findings] == [("GL705", None)]
    assert findings[0].message.endswith(
        "(no fix: the project is Keras itself: its guides and examples show the calls as its users write them, "
        "on every setup it supports)"
    )
    assert fix_source(Linter(settings), KERAS_GUIDE.encode(), str(guide), unsafe=True).source == KERAS_GUIDE.encode()
    # a project that uses Keras gets the fix
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "keras-guides-reader"\n')
    user = load_settings(None, guide)
    user.select = ["GL705"]
    fixed = fix_source(Linter(user), KERAS_GUIDE.encode(), str(guide), unsafe=True).source.decode()
    assert 'model.compile(optimizer="adam", loss="mse", steps_per_execution=32)' in fixed


@pytest.mark.parametrize(
    "files, quote_style",
    [
        ({"pyproject.toml": '[tool.ruff.format]\nquote-style = "single"\n'}, "single"),
        ({"ruff.toml": '[format]\nquote-style = "single"\n', "pyproject.toml": "[tool.ruff]\n"}, "single"),
        ({"pyproject.toml": '[tool.ruff.format]\nquote-style = "preserve"\n'}, None),
        ({"pyproject.toml": "[tool.black]\nline-length = 100\n"}, "double"),
        ({"pyproject.toml": "[tool.black]\nskip-string-normalization = true\n"}, None),
        ({"pyproject.toml": "[tool.ruff]\nline-length = 100\n"}, None),  # (ruff may only lint)
        ({".pre-commit-config.yaml": "repos:\n  - hooks:\n      - id: ruff-format\n"}, "double"),
        # PyG's shape: yapf formats (it keeps quotes as written), ruff's setting says single
        (
            {
                ".pre-commit-config.yaml": "repos:\n  - hooks:\n      - id: yapf\n",
                "pyproject.toml": '[tool.yapf]\nbased_on_style = "pep8"\n[tool.ruff.format]\nquote-style = "single"\n',
            },
            "single",
        ),
        ({}, None),
    ],
)
def test_the_quotes_strings_are_written_in_come_from_the_formatters_settings(tmp_path, files, quote_style):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert load_settings(None, tmp_path).quote_style == quote_style


def test_long_runs_in_setup_py_are_read_in_one_pass_for_the_distribution_name(tmp_path):
    """setup.py comes with the repository: `setup(` followed by most of a megabyte (past which it
    is not read) of unclosed or nested parentheses must cost the name's pattern one pass, not one
    per way of nesting them (a child process with a generous limit, so a regression fails instead
    of hanging the suite)."""
    (tmp_path / "setup.py").write_text(
        "setup(" + "a(b" * 100_000 + "\n" + "setup(" * 40_000 + "\n" + "setup(" + "(x)" * 80_000 + ', name="keras")\n'
    )
    script = textwrap.dedent(f"""\
        from pathlib import Path
        from gpulint.linter.project import facts_from

        print(facts_from({{}}, Path({str(tmp_path)!r})).framework)
    """)
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "Keras\n"
