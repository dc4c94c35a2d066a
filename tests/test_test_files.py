"""Test code is not training code: in test files the performance rules are counted, not reported
(unless `lint-tests`), --fix leaves them alone, and a loop in a test never makes library code run
per step in the project index.  Each case is a small project with a library, a tests/ folder and
(where it matters) a training script."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpulint.linter.analysis.test_files import DEFAULT_TEST_FILES, is_test_path, matches_test_patterns
from gpulint.linter.config import ConfigError, Settings, load_settings
from tests.helpers import run_cli

# A unit test with the shapes the rules report in training code: a serial, unpinned loader and a
# per-step `.item()` and print.
UNIT_TEST = """
import torch
from torch.utils.data import DataLoader


def test_training_step_runs():
    model = torch.nn.Linear(1, 1).cuda()
    loader = DataLoader(load_dataset("train"), batch_size=2)
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""

# The same code as a training script: reported.
TRAIN = UNIT_TEST.replace("def test_training_step_runs():", "def main():")

DEPRECATED_IN_TEST = """
import torch


def test_autocast():
    with torch.cuda.amp.autocast():
        pass
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, code in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code).lstrip())


# The scripts' loader findings (GL101, GL102) and per-step print (GL302) are held back as hints by
# default: these projects show hints, so what is reported in test files and what is not stays visible.
SHOW_HINTS = "[tool.gpulint]\nshow-hints = true\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": SHOW_HINTS, "train.py": TRAIN, "tests/test_train.py": UNIT_TEST})
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lint(capsys, *args: str) -> tuple[int, str]:
    code, out, err = run_cli(["--no-cache", "--output-format", "concise", *args], capsys)
    assert "error" not in err, err
    return code, out


def test_performance_findings_in_test_files_are_counted_not_reported(project, capsys):
    code, out = _lint(capsys, ".")
    assert code == 1
    assert "train.py:" in out and "tests/test_train.py" not in out
    assert "1 test file not linted for performance (test code is not training code; --lint-tests lints them)." in out
    # Only test findings: nothing to fail on, and the summary still says what was left out.
    code, out = _lint(capsys, "tests")
    assert code == 0
    assert out.splitlines() == [
        "All checks passed!",
        "1 test file not linted for performance (test code is not training code; --lint-tests lints them).",
    ]


def test_a_warm_run_says_the_same(project, capsys):
    cold = run_cli(["--output-format", "concise", "."], capsys)
    warm = run_cli(["--output-format", "concise", "."], capsys)
    assert (project / ".gpulint_cache").is_dir()
    assert warm == cold and "1 test file not linted for performance" in warm[1]


def test_lint_tests_reports_them(project, capsys):
    _, out = _lint(capsys, "--lint-tests", "tests")
    codes = sorted(line.split()[1] for line in out.splitlines() if line.startswith("tests/test_train.py"))
    assert codes == ["GL101", "GL102", "GL201", "GL302"]
    assert "not linted" not in out
    (project / "pyproject.toml").write_text(SHOW_HINTS + "lint-tests = true\n")
    _, out = _lint(capsys, "tests")
    assert out.count("tests/test_train.py:") == 4


def test_json_keeps_its_schema_and_reports_only_what_is_reported(project, capsys):
    code, out, _ = run_cli(["--no-cache", "--output-format", "json", "."], capsys)
    findings = json.loads(out)
    assert code == 1 and isinstance(findings, list)  # an array of findings, as before: no count added
    assert findings and {f["filename"].rsplit("/", 1)[-1] for f in findings} == {"train.py"}


def test_what_holds_in_any_code_is_still_reported_in_tests(project, capsys):
    write(project, {"tests/test_amp.py": DEPRECATED_IN_TEST})
    _, out = _lint(capsys, "tests/test_amp.py")
    assert "tests/test_amp.py:5:10: GL402" in out and "(hint: a test file: a test may exercise" in out
    # (as a hint: a test may use the deprecated API on purpose; held back where hints are not shown)
    (project / "pyproject.toml").unlink()
    _, out = _lint(capsys, "tests/test_amp.py")
    assert "GL402" not in out and "1 finding held back as hints" in out


def test_fix_follows_what_is_reported(project, capsys):
    before = (project / "tests" / "test_train.py").read_text()
    _lint(capsys, "--fix", "--unsafe-fixes", ".")
    assert (project / "tests" / "test_train.py").read_text() == before
    assert "pin_memory=True" in (project / "train.py").read_text()


def test_test_files_patterns_say_what_is_test_code(project, capsys):
    write(project, {"checks/smoke.py": UNIT_TEST})
    (project / "pyproject.toml").write_text('[tool.gpulint]\ntest-files = ["checks/"]\n')
    _, out = _lint(capsys, ".")
    assert "checks/smoke.py" not in out
    assert "tests/test_train.py:" in out  # no longer test code: the patterns replace the default
    assert "1 test file not linted for performance" in out


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_x.py",
        "pkg/tests/helpers.py",
        "test/a.py",
        "src/testing/util.py",
        "src/accelerate/test_utils/training.py",
        "test_train.py",
        "pkg/train_test.py",
        "conftest.py",
        "pkg/conftest.py",
        "train.py",
        "pkg/mytests/a.py",
        "pkg/testutils.py",
        "latest/train.py",
        "contest.py",
        "pkg/tests.py",
    ],
)
def test_the_default_conventions_are_the_default_patterns(path):
    assert is_test_path(path) == matches_test_patterns(path, DEFAULT_TEST_FILES)


def test_test_files_are_relative_to_the_configuration(tmp_path):
    settings = Settings(root=tmp_path / "proj", test_files=["checks/"])
    assert settings.is_test_file(tmp_path / "proj" / "checks" / "a.py")
    assert not settings.is_test_file(tmp_path / "proj" / "tests" / "test_a.py")
    default = Settings(root=tmp_path / "proj")
    assert default.is_test_file(tmp_path / "proj" / "tests" / "a.py")
    assert not default.is_test_file(tmp_path / "proj" / "train.py")


def test_a_tests_folder_above_the_project_does_not_make_it_test_code(tmp_path):
    project = tmp_path / "tests" / "proj"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    elsewhere = Settings(root=tmp_path / "cwd")  # (run from another folder, without a configuration)
    assert not elsewhere.is_test_file(project / "train.py")
    assert elsewhere.is_test_file(project / "tests" / "test_train.py")


@pytest.mark.parametrize(
    "body, message",
    [
        ("lint-tests = 1", "`lint-tests` must be true or false"),
        ('test-files = "tests/"', "`test-files` must be a list"),
    ],
)
def test_bad_values_are_errors(tmp_path, body, message):
    config = tmp_path / "pyproject.toml"
    config.write_text(f"[tool.gpulint]\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


# -- the project index --------------------------------------------------------------------------

LIBRARY = """
import torch


def grad_norm(model):
    return model.weight.grad.cuda().norm().item()
"""

TEST_CALLING_THE_LIBRARY = """
import torch
from mylib.helpers import grad_norm


def test_grad_norm():
    model = torch.nn.Linear(1, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):
        model(torch.ones(1, device="cuda")).sum().backward()
        optimizer.step()
        grad_norm(model)
"""

SCRIPT_CALLING_THE_LIBRARY = """
import torch
from mylib.helpers import grad_norm

model = torch.nn.Linear(1, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    model(batch).sum().backward()
    optimizer.step()
    grad_norm(model)
"""


@pytest.fixture
def library(tmp_path, monkeypatch):
    write(
        tmp_path,
        {
            "mylib/__init__.py": "",
            "mylib/helpers.py": LIBRARY,
            "tests/__init__.py": "",
            "tests/test_helpers.py": TEST_CALLING_THE_LIBRARY,
        },
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_loop_in_a_test_does_not_make_library_code_per_step(library, capsys):
    _, out = _lint(capsys, ".")
    assert "mylib/helpers.py" not in out
    _, out = _lint(capsys, "--lint-tests", ".")
    assert "mylib/helpers.py" not in out  # not a question of what is reported: the index says so


def test_a_training_loop_still_does(library, capsys):
    write(library, {"train.py": SCRIPT_CALLING_THE_LIBRARY})
    _, out = _lint(capsys, ".")
    assert "mylib/helpers.py:5:44: GL201" in out


# A training script whose step is a helper the tests folder holds: its `.item()` is per step only
# because the project index knows `train_step` steps.
HELPED_TRAIN = """
import torch
from tests.steps import train_step

model = Net().cuda()
for batch in loader:
    loss = train_step(model, batch, optimizer)
    print(loss.item())
"""

STEP_HELPER = """
import torch


def train_step(model, batch, optimizer):
    loss = model(batch).mean()
    loss.backward()
    optimizer.step()
    return loss
"""


@pytest.fixture
def helped_project(tmp_path, monkeypatch):
    files = {"tests/__init__.py": "", "tests/steps.py": STEP_HELPER, "tests/test_train.py": UNIT_TEST}
    write(tmp_path, {"pyproject.toml": SHOW_HINTS, "train.py": HELPED_TRAIN, **files})
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lint_counting(monkeypatch, capsys, *args: str) -> tuple[str, list[str], list[str]]:
    """A run in this process: (its output, the modules the index summarized, the sources libcst
    parsed for the lint)."""
    from gpulint.linter import engine
    from gpulint.linter.run import project as run_project

    summarized: list[str] = []
    parsed: list[str] = []
    summarize, parse = run_project.summarize, engine.parse

    def counting_summarize(source, dotted, *rest):
        summarized.append(dotted)
        return summarize(source, dotted, *rest)

    def counting_parse(source, *rest):
        parsed.append(source.decode() if isinstance(source, bytes) else source)
        return parse(source, *rest)

    monkeypatch.setattr(run_project, "summarize", counting_summarize)
    monkeypatch.setattr(engine, "parse", counting_parse)
    _, out = _lint(capsys, "--jobs", "1", *args)
    return out, summarized, parsed


def test_a_test_file_is_not_read_as_a_whole_but_a_helper_training_code_imports_is(helped_project, monkeypatch, capsys):
    test_source = (helped_project / "tests" / "test_train.py").read_text()
    out, summarized, parsed = _lint_counting(monkeypatch, capsys, ".")
    assert "train.py:7:11: GL201" in out  # per step through the helper's step: the helper was indexed
    assert "tests.steps" in summarized and "tests.test_train" not in summarized
    assert test_source not in parsed and (helped_project / "train.py").read_text() in parsed
    assert "tests/" not in out.replace("tests.steps", "")
    assert out.splitlines()[-1] == (
        "3 test files not linted for performance (test code is not training code; --lint-tests lints them)."
    )

    train_lines = [line for line in out.splitlines() if line.startswith("train.py:")]

    # A run over the tests alone reads no module for the index: no view is given to a test file.
    out, summarized, parsed = _lint_counting(monkeypatch, capsys, "tests")
    assert summarized == [] and parsed == []
    assert out.splitlines()[0] == "All checks passed!"

    # `lint-tests = true`: the test files are read and reported, and train.py's findings are the same.
    (helped_project / "pyproject.toml").write_text(SHOW_HINTS + "lint-tests = true\n")
    out, summarized, parsed = _lint_counting(monkeypatch, capsys, ".")
    assert "tests.test_train" in summarized and test_source in parsed
    assert [line for line in out.splitlines() if line.startswith("train.py:")] == train_lines
    assert out.count("tests/test_train.py:") == 4 and "not linted" not in out


def test_the_editor_reads_test_files_as_the_command_line_does(helped_project):
    from gpulint.server.engine_adapter import Projects

    (helped_project / "pyproject.toml").write_text("[tool.gpulint]\n")
    train = helped_project / "train.py"
    project = Projects().for_path(train)
    summarized: list[str] = []
    summary = project._summary

    def counting_summary(path, source, dotted, *rest):
        summarized.append(dotted)
        return summary(path, source, dotted, *rest)

    project._summary = counting_summary  # type: ignore[method-assign]
    report = project.lint(train.read_text(), str(train))
    assert ("GL201", 7) in [(p.code, p.start[0]) for p in report.problems]
    assert "tests.steps" in summarized and "tests.test_train" not in summarized
    test_file = helped_project / "tests" / "test_train.py"
    assert project.lint(test_file.read_text(), str(test_file)).problems == []
