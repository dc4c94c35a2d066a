"""Local rules: rule modules a project keeps in its repository and names in `local-rules`.

The example project (tests/local_rules/project: a pyproject.toml and the ACME001 rule that
docs/local-rules.md walks through) is copied into a temporary folder for each test, so caches and
edits stay there.  A second rule module, `planted`, records that it ran (a file next to it): the
review bot and the language server must not run it unless told to.
"""

from __future__ import annotations

import pickle
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from gpulint.linter.config import ConfigError, load_settings
from gpulint.linter.engine import Linter
from gpulint.linter.run.cache import ResultCache
from gpulint.linter.run.outcome import RunOptions
from gpulint.linter.run.runner import run
from tests.helpers import ROOT, run_cli
from tests.integrations.conftest import git, review_repo  # noqa: F401 - review_repo is a fixture

EXAMPLE = ROOT / "tests" / "local_rules" / "project"
RULE_FILE = "lint_rules/hardcoded_cuda_index.py"

PLANTED = textwrap.dedent(
    '''\
    """A rule module that leaves a mark when it runs."""
    from pathlib import Path

    from gpulint.linter.rule import Rule

    Path(__file__).with_name("ran.txt").write_text("the module ran\\n")


    class Planted(Rule):
        """## What it finds\\nEvery call."""

        code = "EVIL1"
        name = "planted"
        message = "a planted rule ran"

        def visit_Call(self, node):
            self.report(node)
    '''
)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE, root)
    return root


def _settings(project: Path, load: bool = True):
    return load_settings(project / "pyproject.toml", load_local_rules=load)


def _codes(out: str) -> list[str]:
    return re.findall(r"^\S+:\d+:\d+: (\S+) ", out, re.M)


def _set_local_rules(project: Path, *entries: str, extra: str = "") -> None:
    listed = ", ".join(f'"{entry}"' for entry in entries)
    (project / "pyproject.toml").write_text(f"[tool.gpulint]\nlocal-rules = [{listed}]\n{extra}")


# -- the rule runs like a built-in one --------------------------------------------------------------
def test_local_rule_fires_beside_the_built_in_ones(project, capsys):
    (project / "train.py").write_text(
        "import torch\nimport torchvision\nfrom torch.utils.data import DataLoader\n"
        'model = torch.nn.Linear(4, 2).to("cuda:0")\n'
        'loader = DataLoader(torchvision.datasets.ImageFolder("data"))\n'
    )
    # (GL101 and GL102 are held back as hints by default: shown, they are the built-in findings)
    code, out, err = run_cli(["check", str(project), "--no-cache", "--show-hints"], capsys)
    assert code == 1, err
    assert sorted(_codes(out)) == ["ACME001", "GL101", "GL102"]
    assert "train.py:4:31: ACME001 GPU index written into the code" in out


def test_local_rule_is_selected_ignored_and_suppressed_by_its_id(project, capsys):
    target = str(project / "train.py")
    assert _codes(run_cli(["check", target, "--no-cache", "--select", "ACME001"], capsys)[1]) == ["ACME001"]
    assert _codes(run_cli(["check", target, "--no-cache", "--select", "hardcoded-cuda-index"], capsys)[1]) == [
        "ACME001"
    ]
    assert _codes(run_cli(["check", target, "--no-cache", "--select", "GL1"], capsys)[1]) == []
    assert run_cli(["check", target, "--no-cache", "--ignore", "ACME"], capsys)[0] == 0
    # in the configuration too, and per file
    _set_local_rules(project, RULE_FILE, extra='per-file-ignores = { "train.py" = ["ACME001"] }\n')
    assert run_cli(["check", target, "--no-cache"], capsys)[0] == 0
    _set_local_rules(project, RULE_FILE)
    for comment in ("# gpulint: ignore[ACME001]", "# noqa: ACME001"):
        source = (EXAMPLE / "train.py").read_text().replace('.to("cuda:0")', f'.to("cuda:0")  {comment}')
        (project / "train.py").write_text(source)
        code, out, err = run_cli(["check", target, "--no-cache"], capsys)
        assert code == 0, out + err


def test_unknown_selector_is_still_an_error(project, capsys):
    code, _, err = run_cli(["check", str(project), "--no-cache", "--select", "ACME9"], capsys)
    assert code == 2 and "unknown rule selector 'ACME9'" in err


def test_editing_a_local_rule_changes_the_cache_key_and_the_results(project, capsys):
    before = _settings(project)
    key_before = ResultCache.for_run(project / "cache", before.fingerprint(), RunOptions()).run_key
    args = ["check", str(project / "train.py"), "--cache-dir", str(project / "cache")]
    assert "every rank of a multi-GPU run" in run_cli(args, capsys)[1]
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace("every rank of a multi-GPU run uses", "all ranks share"))
    after = _settings(project)
    assert ResultCache.for_run(project / "cache", after.fingerprint(), RunOptions()).run_key != key_before
    out = run_cli(args, capsys)[1]
    assert "all ranks share the same GPU" in out and "every rank" not in out  # not served from the cache


def test_local_rule_findings_are_served_from_the_cache(project):
    settings = _settings(project)
    cache = ResultCache.for_run(project / "cache", settings.fingerprint(), RunOptions())
    first = run([project / "train.py"], settings, RunOptions(), cache=cache)
    again = ResultCache.for_run(project / "cache", _settings(project).fingerprint(), RunOptions())
    second = run([project / "train.py"], _settings(project), RunOptions(), cache=again)
    assert (cache.hits, again.hits) == (0, 1)
    assert [f.code for f in second.findings] == [f.code for f in first.findings] == ["ACME001"]


def _many_files(project: Path, count: int = 6) -> list[Path]:
    files = []
    for number in range(count):
        path = project / f"worker_{number}.py"
        path.write_text(f'import torch\nmodel_{number} = torch.nn.Linear(2, 2).to("cuda:{number}")\n')
        files.append(path)
    return files


def test_workers_load_local_rules(project, capsys):
    _many_files(project)
    code, out, err = run_cli(["check", str(project), "--no-cache", "--jobs", "2", "--select", "ACME"], capsys)
    assert code == 1, err
    assert _codes(out) == ["ACME001"] * 7  # six workers' files and train.py


@pytest.mark.slow
def test_spawned_workers_run_the_sources_the_parent_loaded(project, monkeypatch):
    """With `spawn` (macOS, Windows) the settings are pickled to each worker: the local rules go as
    the sources the parent hashed, so a worker runs that code even if the file changes meanwhile."""
    import multiprocessing

    from gpulint.linter.run import parallel

    monkeypatch.setattr(parallel, "_context", lambda: multiprocessing.get_context("spawn"))
    files = _many_files(project)
    settings = _settings(project)
    settings.select = ["ACME"]
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace('code = "ACME001"', 'code = "ACME002"'))  # after loading
    result = run(files, settings, RunOptions(), jobs=2)
    assert not result.errors
    assert [f.code for o in result.outcomes for f in o.result.findings] == ["ACME001"] * len(files)


def test_settings_pickle_as_the_loaded_sources(project):
    settings = _settings(project)
    copy = pickle.loads(pickle.dumps(settings))
    assert copy.local_rules.digest() == settings.local_rules.digest()
    assert [rule.code for rule in copy.catalog()] == [rule.code for rule in settings.catalog()]
    assert Linter(copy).lint_source(b'import torch\nx = torch.device("cuda:3")\n', "a.py").findings[0].code == "ACME001"


def test_no_local_rules_skips_them_and_tolerates_their_ids(project, capsys):
    _set_local_rules(project, RULE_FILE, extra='ignore = ["ACME001"]\nextend-select = ["ACME"]\n')
    code, out, err = run_cli(["check", str(project), "--no-cache", "--no-local-rules"], capsys)
    assert code == 0 and "1 `local-rules` entry not loaded (--no-local-rules)" in err
    assert run_cli(["check", str(project), "--no-cache", "--no-local-rules", "--select", "GLX"], capsys)[0] == 2


# -- listing, explaining and testing ----------------------------------------------------------------
def test_rules_and_rule_list_and_explain_local_rules(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, out, _ = run_cli(["rules"], capsys)
    assert code == 0 and re.search(r"^ACME001\s+hardcoded-cuda-index\s+on\s", out, re.M)
    assert "ACME001" not in run_cli(["rules", "--no-local-rules"], capsys)[1]
    assert run_cli(["rules", "--enabled", "--ignore", "ACME"], capsys)[1].count("ACME") == 0
    code, out, _ = run_cli(["rule", "acme001"], capsys)
    assert code == 0 and out.startswith("# ACME001 hardcoded-cuda-index") and "## Why it is slow" in out
    assert "Local rule, from" in out and "hardcoded_cuda_index.py" in out
    assert run_cli(["rule", "ACME001", "--no-local-rules"], capsys)[0] == 2


def test_rules_select_lists_what_it_selects_in_aligned_columns(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, out, err = run_cli(["rules", "--select", "ACME"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ACME001  hardcoded-cuda-index  on    fix:-       "
        "GPU index written into the code: every rank of a multi-GPU run uses the same GPU"
    ]
    code, out, _ = run_cli(["rules", "--select", "GL10,ACME"], capsys)
    lines = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines] == ["GL101", "GL102", "GL103", "GL104", "GL105", "ACME001"]
    # one column of defaults (on, or held for a hint by default), whatever the code's length
    assert len({re.search(r" (on|held) ", line).start() for line in lines}) == 1
    # not loaded, the project's ids select nothing, and the listing says why
    code, out, err = run_cli(["rules", "--select", "ACME", "--no-local-rules"], capsys)
    assert (code, out) == (0, "") and "not loaded (--no-local-rules)" in err


def test_test_rules_passes_on_good_cases(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, out, err = run_cli(["test-rules"], capsys)
    assert (code, out, err) == (0, "Ran 4 cases of 1 rule: all passed.\n", "")  # the result is output, not an error


def test_test_rules_fails_on_a_broken_case_and_says_which(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace('"3:9",', '"3:8",').replace("f'cuda:{local_rank}'", "'cuda:1'"))
    code, out, err = run_cli(["test-rules"], capsys)
    assert code == 1, err
    assert "FAIL ACME001 VALID[2] (lint_rules/hardcoded_cuda_index.py): reported at 2:10" in out
    assert "FAIL ACME001 INVALID[1] (lint_rules/hardcoded_cuda_index.py): expected findings at 2:10, 3:8, 4:9;" in out
    assert out.endswith("Ran 4 cases of 1 rule: 2 failed.\n") and err == ""


def test_test_rules_checks_the_docs_example(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace('model = Net().to("cuda:0")', 'model = Net().to("cuda")'))
    code, out, _ = run_cli(["test-rules"], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        "FAIL ACME001 docs Example (lint_rules/hardcoded_cuda_index.py): the docs' Example is not reported"
    )


def test_test_rules_reports_a_rule_that_crashes_as_a_failure(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace("        args = positional_args(node)", "        args = node.nope"))
    code, out, err = run_cli(["test-rules"], capsys)
    assert code == 1 and "Traceback" not in out + err
    assert "FAIL ACME001 INVALID[1] (lint_rules/hardcoded_cuda_index.py): raised AttributeError:" in out


def test_a_local_rules_text_cannot_print_a_workflow_command(project, capsys, monkeypatch):
    """A rule's message, documentation and errors are the project's text: `rules`, `rule` and
    `test-rules` print them as findings are printed, never as a line the GitHub Actions runner
    takes for a command (past leading whitespace, `::`; anywhere, `##[`)."""
    from tests.hostile.conftest import workflow_commands

    monkeypatch.chdir(project)
    rule = project / RULE_FILE
    text = rule.read_text()
    text = text.replace("    ## What it finds\n", "    ## What it finds\n    ::error::from the docs\n")
    text = text.replace('message = "GPU index', 'message = "##[warning]GPU index')
    text = text.replace("        args = positional_args(node)", '        raise ValueError("boom\\n  ::error::raised")')
    rule.write_text(text)
    outputs = []
    for command in (["rules"], ["rule", "ACME001"], ["test-rules"]):
        code, out, err = run_cli(command, capsys)
        outputs.append(out)
        assert workflow_commands(out + "\n" + err) == [], (command, out + err)
    listing, docs, failures = outputs
    assert "##\\x5bwarning]GPU index" in listing
    assert "\n./::error::from the docs\n" in docs
    assert "\n./      ::error::raised\n" in failures  # (its own indent, then the line's)


def test_test_rules_without_local_rules_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["test-rules"], capsys)
    assert code == 2 and "no rule to test" in err
    code, out, _ = run_cli(["test-rules", "--builtin", "--select", "GL102"], capsys)
    assert code == 0 and "all passed" in out


def test_a_local_rule_that_fails_on_a_file_is_one_error_line_and_the_run_goes_on(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace("        args = positional_args(node)", "        args = node.nope"))
    for number in range(4):  # enough files for worker processes
        (project / f"other_{number}.py").write_text(
            "import torch\nimport torchvision\nfrom torch.utils.data import DataLoader\n"
            'l = DataLoader(torchvision.datasets.ImageFolder("data"))\n'
        )
    for jobs in ("1", "2"):
        # (GL101, a hint by default, named: the built-in finding each other file still gets)
        code, out, err = run_cli(["check", ".", "--no-cache", "--extend-select", "GL101", "--jobs", jobs], capsys)
        assert code == 2 and "Traceback" not in err
        assert _codes(out) == ["GL101"] * 4  # the other files still run
        assert err.splitlines() == [
            "gpulint: error: train.py: local rule lint_rules/hardcoded_cuda_index.py:71 failed: "
            "AttributeError: 'Call' object has no attribute 'nope'; file skipped"
        ]


# -- bad local rules: one line, exit 2 --------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        (('code = "ACME001"', 'code = "GL101"'), "code GL101 is gpulint's dataloader-serial"),
        (('code = "ACME001"', 'code = "GL999"'), "code GL999 starts with GL, which is gpulint's own"),
        (('code = "ACME001"', 'code = "acme-1"'), "code 'acme-1' must be capital letters then digits"),
        (
            ('name = "hardcoded-cuda-index"', 'name = "dataloader-serial"'),
            "name 'dataloader-serial' is gpulint's GL101",
        ),
        (("import re\n", "import re\nimport no_such_module\n"), ":6: cannot be loaded: ModuleNotFoundError: No module"),
        (("import re\n", "import re\nraise RuntimeError('boom')\n"), ":6: cannot be loaded: RuntimeError: boom"),
        (("import re\n", "import re\ndef broken(:\n"), ":6: cannot be loaded: SyntaxError: invalid syntax"),
        (("class HardcodedCudaIndex(Rule):", "class HardcodedCudaIndex:"), "defines no rule"),
        (('triggers = ((".to(", ".cuda(", "device"),)', 'triggers = (".to(",)'), "`triggers` must be None or"),
    ],
)
def test_a_bad_local_rule_is_one_error_line(project, capsys, change, message):
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace(*change))
    code, out, err = run_cli(["check", str(project), "--no-cache"], capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("gpulint: error: local rule ") and message in err, err
    assert "Traceback" not in err


def test_two_local_rules_with_one_code_and_bad_entries(project, capsys):
    shutil.copy(project / RULE_FILE, project / "lint_rules" / "copy.py")
    _set_local_rules(project, "lint_rules/")  # a folder: every module in it
    code, _, err = run_cli(["check", str(project), "--no-cache"], capsys)
    assert code == 2 and "ACME001 is also claimed by" in err and len(err.splitlines()) == 1
    for entries, message in (
        ("missing.py", "missing.py does not exist"),
        ("pyproject.toml", "is not a Python file or a folder"),
    ):
        _set_local_rules(project, entries)
        code, _, err = run_cli(["check", str(project), "--no-cache"], capsys)
        assert code == 2 and message in err and len(err.splitlines()) == 1
    (project / "pyproject.toml").write_text('[tool.gpulint]\nlocal-rules = "lint_rules"\n')
    with pytest.raises(ConfigError, match="must be a list of paths"):
        _settings(project)


def test_paths_are_relative_to_the_config_file(project, capsys, monkeypatch):
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = run_cli(["check", str(project / "train.py"), "--no-cache"], capsys)
    assert code == 1 and _codes(out) == ["ACME001"]


# -- an entry names project code, inside the configuration's folder ---------------------------------
@pytest.mark.parametrize("load", [True, False])
@pytest.mark.parametrize(
    "entry", ["{outside}/rules/planted.py", "../outside/rules/planted.py", "lint_rules/../../x.py"]
)
def test_an_entry_out_of_the_configurations_folder_is_a_config_error(project, load, entry):
    outside = project.parent / "outside"
    outside.mkdir()
    mark = _plant(outside)
    _set_local_rules(project, entry.format(outside=outside))
    with pytest.raises(ConfigError, match="must be a path relative to the configuration file's folder, inside it"):
        _settings(project, load)
    assert not mark.exists()


@pytest.mark.parametrize(
    "link, entry", [("shared", "shared/"), ("shared", "shared/planted.py"), ("lint_rules/x.py", "lint_rules/")]
)
def test_a_symbolic_link_out_of_the_configurations_folder_is_a_config_error(project, link, entry):
    outside = project.parent / "outside"
    outside.mkdir()
    mark = _plant(outside)
    target = outside / "rules" / ("planted.py" if link.endswith(".py") else "")
    (project / link).symlink_to(target)
    _set_local_rules(project, entry)
    with pytest.raises(ConfigError, match="leads outside the configuration file's folder through a symbolic link"):
        _settings(project)
    assert not mark.exists()


def test_entries_that_are_not_loaded_are_not_looked_up(project, capsys):
    # Whether what an entry names exists, or where a link in it leads, must not show: a run that
    # does not load local rules says the same of a link to a folder that is there and of one that
    # is not.
    (project / "home").symlink_to(project.parent / "home")
    _set_local_rules(project, "home/.ssh/", "missing.py")
    outputs = []
    for exists in (False, True):
        if exists:
            (project.parent / "home" / ".ssh").mkdir(parents=True)
        settings = _settings(project, load=False)
        assert settings.local_rules_skipped and settings.local_rules is None
        outputs.append(run_cli(["check", str(project), "--no-cache", "--no-local-rules"], capsys))
    assert outputs[0] == outputs[1]
    code, _, err = outputs[0]
    assert code == 0 and "2 `local-rules` entries not loaded (--no-local-rules)" in err


def test_review_and_the_language_server_do_not_look_up_entries_they_do_not_load(review_repo, capsys):  # noqa: F811
    from gpulint.server.engine_adapter import Projects

    (review_repo / "pyproject.toml").write_text('[tool.gpulint]\nlocal-rules = ["missing/"]\n')
    code, _, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1 and "1 `local-rules` entry not loaded (no --allow-local-rules)" in err
    assert Projects().for_path(review_repo / "train.py").settings.local_rules_skipped


# -- project code runs only where the user trusts the configuration ---------------------------------
def _plant(root: Path) -> Path:
    (root / "rules").mkdir()
    (root / "rules" / "planted.py").write_text(PLANTED)
    (root / "pyproject.toml").write_text('[tool.gpulint]\nlocal-rules = ["rules/planted.py"]\n')
    return root / "rules" / "ran.txt"


def test_review_does_not_run_local_rules_unless_allowed(review_repo, capsys):  # noqa: F811 - the fixture
    mark = _plant(review_repo)
    git(review_repo, "add", ".")
    git(review_repo, "commit", "-q", "-m", "a local rule")
    code, out, err = run_cli(["review", "--base", "main", "--format", "json"], capsys)
    assert code == 1, err
    assert not mark.exists() and "EVIL1" not in out
    assert "1 `local-rules` entry not loaded (no --allow-local-rules)" in err
    code, out, err = run_cli(["review", "--base", "main", "--format", "json", "--allow-local-rules"], capsys)
    assert mark.exists() and "<!-- gpulint:EVIL1:" in out, err


@pytest.mark.slow
def test_github_action_runs_local_rules_only_when_its_input_says_so(review_repo, tmp_path, monkeypatch):  # noqa: F811
    from tests.integrations.test_review import _run_action_step

    mark = _plant(review_repo)
    run = _run_action_step("annotations", tmp_path)
    assert run.returncode == 0, run.stderr
    assert not mark.exists() and "EVIL1" not in run.stdout and "GL201" in run.stdout  # (a default rule)
    monkeypatch.setenv("INPUT_LOCAL_RULES", "true")
    run = _run_action_step("annotations", tmp_path)
    assert run.returncode == 0, run.stderr
    assert mark.exists() and "title=EVIL1" in run.stdout


def test_unused_suppression_of_a_local_rule_is_reported(project, capsys):
    (project / "clean.py").write_text('import torch\nmodel = torch.nn.Linear(2, 2).to("cuda")  # noqa: ACME001\n')
    code, out, _ = run_cli(["check", str(project / "clean.py"), "--no-cache", "--select", "ACME,GL900"], capsys)
    assert code == 1 and "GL900 Unused suppression of ACME001" in out
    # another tool's code is not gpulint's to judge
    (project / "clean.py").write_text('import torch\nmodel = torch.nn.Linear(2, 2).to("cuda")  # noqa: XYZ001\n')
    assert run_cli(["check", str(project / "clean.py"), "--no-cache", "--select", "ACME,GL900"], capsys)[0] == 0


def test_language_server_does_not_run_local_rules_unless_allowed(project):
    from gpulint.server.engine_adapter import Projects

    mark = _plant(project)
    source = (EXAMPLE / "train.py").read_text()
    untrusted = Projects().for_path(project / "train.py")
    assert not mark.exists()
    assert untrusted.settings.local_rules_skipped
    assert "EVIL1" not in {p.code for p in untrusted.lint(source, "train.py").problems}
    trusted = Projects(allow_local_rules=True).for_path(project / "train.py")
    assert mark.exists()
    assert "EVIL1" in {p.code for p in trusted.lint(source, "train.py").problems}


def test_language_server_reloads_an_edited_local_rule(project):
    from gpulint.server.engine_adapter import Projects

    projects = Projects(allow_local_rules=True)
    source = (EXAMPLE / "train.py").read_text()
    first = projects.for_path(project / "train.py")
    assert "ACME001" in {p.code for p in first.lint(source, "train.py").problems}
    rule = project / RULE_FILE
    rule.write_text(rule.read_text().replace('code = "ACME001"', 'code = "ACME007"'))
    import os

    os.utime(rule, ns=(rule.stat().st_atime_ns, rule.stat().st_mtime_ns + 10**9))
    second = projects.for_path(project / "train.py")
    assert second is not first and "ACME007" in {p.code for p in second.lint(source, "train.py").problems}


@pytest.mark.slow
def test_server_command_passes_the_opt_in(project):
    pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
    from tests.lsp_client import LspClient

    mark = _plant(project)
    for extra, expected in (([], set()), (["--allow-local-rules"], {"EVIL1"})):
        client = LspClient([sys.executable, "-m", "gpulint", "server", *extra], cwd=project)
        try:
            client.initialize(project)
            uri = client.open(project / "train.py", (EXAMPLE / "train.py").read_text())
            codes = {d["code"] for d in client.diagnostics(uri)}
        finally:
            client.close()
        assert codes & {"EVIL1"} == expected
        assert mark.exists() == bool(expected)


# -- the documentation shows the tested rule ---------------------------------------------------------
def test_docs_show_the_example_rule_config_script_and_output_verbatim(project, capsys, monkeypatch):
    doc = (ROOT / "docs" / "local-rules.md").read_text(encoding="utf-8")
    assert (EXAMPLE / RULE_FILE).read_text(encoding="utf-8") in doc
    assert '[tool.gpulint]\nlocal-rules = ["lint_rules/hardcoded_cuda_index.py"]\n' in doc
    assert "```python\n" + (EXAMPLE / "train.py").read_text(encoding="utf-8") + "```\n" in doc  # what is linted
    monkeypatch.chdir(project)
    for command in (["check", ".", "--no-cache"], ["rules", "--select", "ACME"], ["test-rules"]):
        out = run_cli(command, capsys)[1]
        assert f"$ gpulint {' '.join(c for c in command if c != '--no-cache')}\n{out}" in doc, out


def test_a_local_rules_triggers_keep_files_whose_code_lacks_them_unparsed(project):
    from gpulint.linter.engine import Linter

    linter = Linter(_settings(project))
    prose = b'import torch\n\n"""Never write cuda:0 here: see train.py."""\n'
    assert not linter.lint_source(prose, "notes.py").parsed  # spells `cuda`, holds no trigger
    code = b'import torch\n\nmodel = model.to("cuda:0")\n'
    assert [f.code for f in linter.lint_source(code, "train.py").findings] == ["ACME001"]
