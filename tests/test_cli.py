"""The command line, run as users run it (a subprocess): exit codes, formats, stdin, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

BAD = textwrap.dedent("""
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder
    device = "cuda"
    ds = ImageFolder("data")
    loader = DataLoader(ds, num_workers=4)
""")
CLEAN = BAD.replace("num_workers=4)", "num_workers=4, pin_memory=True)")


def gpulint(*args: str, cwd=None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        cwd=cwd or ROOT,
        input=stdin,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


@pytest.fixture
def project(tmp_path):
    # BAD's finding (GL102) is held back as a hint by default; these tests are about the command
    # line, so the project shows it, as one whose owner wants those findings does.
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\n")
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_exit_codes_and_text_format(project):
    result = gpulint("bad.py", "clean.py", cwd=project)
    assert result.returncode == 1
    out = result.stdout.decode()
    assert "bad.py:7:10: GL102 [*] DataLoader without `pin_memory=True`" in out
    assert "Found 1 problem (1 fixable with --fix)." in out
    clean = gpulint("clean.py", cwd=project)
    assert clean.returncode == 0 and "All checks passed!" in clean.stdout.decode()
    assert gpulint("bad.py", "--exit-zero", cwd=project).returncode == 0


def test_the_command_writes_everything_before_it_leaves(project):
    # `python -m gpulint` ends the process without the interpreter's teardown (cli.console): what
    # was buffered must still be written, and the exit code be main's.
    for index in range(300):  # (far more output than one pipe buffer)
        (project / f"bad_{index}.py").write_text(BAD)
    result = gpulint("--output-format", "json", "--no-cache", ".", cwd=project)
    assert result.returncode == 1, result.stderr
    assert len(json.loads(result.stdout)) == 301
    piped = subprocess.run(
        f"{sys.executable} -m gpulint --no-cache . | head -n 1",
        shell=True,
        cwd=project,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert piped.stdout.count(b"\n") == 1 and b"Traceback" not in piped.stderr, piped.stderr


@pytest.mark.parametrize(
    "ending, code, stderr",
    [("sys.exit(3)", 3, ""), ("sys.exit('gpulint: stopped')", 1, "gpulint: stopped\n"), ("sys.exit()", 0, "")],
)
def test_console_writes_what_is_buffered_and_passes_the_code_on(ending, code, stderr):
    # ... and runs the atexit handlers a normal exit would (a local rule may register one).
    program = (
        "import atexit, sys\n"
        "from gpulint import cli\n"
        f"def main():\n    atexit.register(sys.stdout.write, '!')\n    sys.stdout.write('x' * 100)\n    {ending}\n"
        "cli.main = main\n"
        "cli.console()\n"
    )
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # (buffered: no PYTHONUNBUFFERED)
    run = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stdout, run.stderr) == (code, "x" * 100 + "!", stderr)


def test_main_exits_by_raising_so_a_caller_keeps_its_process(project, capsys):
    from gpulint.cli import main

    with pytest.raises(SystemExit) as finished:
        main(["check", "--no-cache", str(project / "clean.py")])
    assert finished.value.code == 0 and "All checks passed!" in capsys.readouterr().out


def test_check_subcommand_is_the_same(project):
    assert gpulint("check", "bad.py", cwd=project).stdout == gpulint("bad.py", cwd=project).stdout


def test_json_format_is_ruff_shaped(project):
    result = gpulint("bad.py", "--format", "json", cwd=project)
    findings = json.loads(result.stdout)
    assert len(findings) == 1
    finding = findings[0]
    assert {
        "code",
        "message",
        "filename",
        "location",
        "end_location",
        "fix",
        "url",
        "name",
        "severity",
        "noqa_row",
        "cell",
    } <= set(finding)
    assert finding["code"] == "GL102" and finding["name"] == "dataloader-unpinned"
    assert finding["location"] == {"row": 7, "column": 10}
    assert finding["fix"]["applicability"] == "safe"
    edit = finding["fix"]["edits"][0]
    assert edit["content"] == "loader = DataLoader(ds, num_workers=4, pin_memory=True)\n"
    assert edit["location"] == {"row": 7, "column": 1} and edit["end_location"] == {"row": 8, "column": 1}


def test_fix_rewrites_and_reports_what_is_left(project):
    result = gpulint("bad.py", "--fix", cwd=project)
    assert result.returncode == 0, result.stdout
    assert "Fixed 1 problem." in result.stdout.decode()
    assert (project / "bad.py").read_text() == CLEAN


def test_diff_prints_and_writes_nothing(project):
    result = gpulint("bad.py", "--diff", cwd=project)
    assert result.returncode == 1
    assert "+loader = DataLoader(ds, num_workers=4, pin_memory=True)" in result.stdout.decode()
    assert (project / "bad.py").read_text() == BAD
    assert gpulint("clean.py", "--diff", cwd=project).returncode == 0


def test_select_ignore_and_statistics(project):
    assert gpulint("bad.py", "--ignore", "GL102", cwd=project).returncode == 0
    assert gpulint("bad.py", "--select", "GL1", cwd=project).returncode == 1
    assert gpulint("bad.py", "--select", "GL3,GL7", cwd=project).returncode == 0
    stats = gpulint("bad.py", "--statistics", cwd=project).stdout.decode()
    assert "1\tGL102\t[*] dataloader-unpinned" in stats


def test_config_from_pyproject_and_bad_config(project):
    (project / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\nignore = ['GL102']\n")
    assert gpulint("bad.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text("[tool.gpulint]\nignor = ['GL102']\n")
    result = gpulint("bad.py", cwd=project)
    assert result.returncode == 2
    assert "unknown key(s) ignor" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_stdin(project):
    result = gpulint("-", "--stdin-filename", "train.py", stdin=BAD.encode(), cwd=project)
    assert result.returncode == 1 and "train.py:7:10: GL102" in result.stdout.decode()
    fixed = gpulint("-", "--stdin-filename", "train.py", "--fix", stdin=BAD.encode(), cwd=project)
    assert fixed.stdout.decode() == CLEAN


def test_syntax_error_file_among_good_ones(project):
    (project / "broken.py").write_text("import torch\nloader = DataLoader(ds))\nmodel.cuda()\n")
    result = gpulint(".", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "broken.py:2:24: GL000 SyntaxError" in out and "bad.py:7:10: GL102" in out
    assert "Traceback" not in result.stderr.decode()


def test_bad_inputs_get_one_line_each(project):
    (project / "undecodable.py").write_bytes(b"import torch\nx = '\xff\xfe'\nDataLoader(x)\nmodel.cuda()\n")
    (project / "loop").mkdir()
    (project / "loop" / "self").symlink_to(project / "loop")  # inside the tree: not followed
    (project / "named.py").symlink_to(project / "named.py")
    result = gpulint(".", "missing.py", "named.py", cwd=project)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert "missing.py: no such file or directory" in err
    assert "undecodable.py: cannot decode" in err
    assert "named.py: symbolic link loop; skipped" in err
    assert len(err.splitlines()) == 3
    assert "Traceback" not in err
    assert "bad.py:7:10: GL102" in result.stdout.decode()  # the run went on


def test_usage_error_exit_code(project):
    assert gpulint("bad.py", "--format", "yaml", cwd=project).returncode == 2
    assert gpulint("bad.py", "--no-such-flag", cwd=project).returncode == 2
    assert gpulint("bad.py", "--select", "GL999", cwd=project).returncode == 2


def test_rules_and_rule_commands():
    listing = gpulint("rules").stdout.decode()
    assert "GL101  dataloader-serial" in listing and "GL302" in listing
    explanation = gpulint("rule", "GL101")
    text = explanation.stdout.decode()
    assert explanation.returncode == 0
    assert "# GL101 dataloader-serial" in text and "## Why it is slow" in text
    assert gpulint("rule", "dataloader-unpinned").returncode == 0
    assert gpulint("rule", "GL999").returncode == 2


def test_options_may_follow_paths(project):
    result = gpulint("bad.py", "--select", "GL1", "clean.py", "--statistics", cwd=project)
    assert result.returncode == 1 and "1\tGL102" in result.stdout.decode()


def test_a_mistyped_command_names_the_closest_one(project):
    result = gpulint("prof", cwd=project)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode() == "gpulint: error: no such command or path: 'prof' (did you mean 'profile'?)\n"
    unknown = gpulint("xyzzy", cwd=project)
    assert unknown.returncode == 2 and "no such command or path: 'xyzzy'" in unknown.stderr.decode()
    (project / "serve").mkdir()  # an existing path is linted, whatever it looks like
    (project / "serve" / "bad.py").write_text(BAD)
    assert gpulint("serve", cwd=project).returncode == 1
    # a missing file is a path, not a command: reported, and the others are still linted
    missing = gpulint("missing.py", "bad.py", cwd=project)
    assert missing.returncode == 2 and "missing.py: no such file or directory" in missing.stderr.decode()
    assert "bad.py:7:10: GL102" in missing.stdout.decode()


def test_did_you_mean_covers_commands_added_later(monkeypatch, capsys):
    from gpulint.cli import COMMANDS, Command
    from tests.helpers import run_cli

    monkeypatch.setitem(COMMANDS, "server", Command("gpulint.cli:add_version", "Stand-in for a later command."))
    code, out, err = run_cli(["serve"], capsys)
    assert (code, out) == (2, "")
    assert err == "gpulint: error: no such command or path: 'serve' (did you mean 'server'?)\n"


def test_no_all_clear_after_an_error(project):
    for paths in (["clean.py", "missing.py"], ["clean.py", "undecodable.py"]):
        (project / "undecodable.py").write_bytes(b"import torch\nx = '\xff\xfe'\nDataLoader(x)\nmodel.cuda()\n")
        for extra in ([], ["--statistics"], ["--fix"]):
            result = gpulint(*paths, *extra, cwd=project)
            out, err = result.stdout.decode(), result.stderr.decode()
            assert result.returncode == 2 and "gpulint: error: " in err, (paths, extra, err)
            assert "All checks passed!" not in out + err, (paths, extra, out)
            assert "No problems found, but 1 error stopped some checks (see above)." in out, (paths, extra, out)
    assert "All checks passed!" in gpulint("clean.py", cwd=project).stdout.decode()
    (project / "pyproject.toml").write_text("[tool.gpulint]\nignor = ['GL102']\n")
    config_error = gpulint("clean.py", cwd=project)
    assert config_error.returncode == 2 and config_error.stdout == b""


def test_rules_enabled_lists_what_check_would_run(project):
    every = gpulint("rules", "--format", "json", cwd=project)
    codes = [row["code"] for row in json.loads(every.stdout)]
    hints = {row["code"] for row in json.loads(every.stdout) if row["default"] == "hint"}
    assert every.returncode == 0 and "GL102" in codes and hints

    def enabled(*args: str) -> list[str]:
        result = gpulint("rules", "--format", "json", *args, cwd=project)
        assert result.returncode == 0, result.stderr
        return [row["code"] for row in json.loads(result.stdout)]

    default = enabled("--enabled")
    assert default == [code for code in codes if code not in hints]
    (project / "pyproject.toml").write_text("[tool.gpulint]\nshow-hints = true\nignore = ['GL102']\n")
    assert enabled("--enabled") == [code for code in default if code != "GL102"]
    # (check reports GL000, a file not parsing, whatever is selected; a listing of a selection
    # lists it when the selection names it)
    selected = [code for code in codes if code.startswith("GL1") and code != "GL102"]
    assert enabled("--select", "GL1") == selected
    assert enabled("--select", "GL1,GL000") == ["GL000", *selected]
    assert enabled() == codes
    assert gpulint("rules", "--select", "GL999", cwd=project).returncode == 2


# Modules the entry point must not load to print its version or help, or to parse a command line.
HEAVY = (
    "libcst",
    "gpulint.linter",
    "gpulint.rules",
    "gpulint.runtime_check",
    "gpulint.review",
    "torch",
    "tensorflow",
    "rich",
    "typer",
    "pydantic",
)


def imported_modules(*args: str) -> set[str]:
    """Every module `python -X importtime -m gpulint ARGS` imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpulint", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


def heavy(modules) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}


def test_version_and_help_import_no_heavy_module():
    for args in (["--version"], ["--help"], ["check", "--help"], ["rules", "--help"], ["review", "--help"]):
        modules = imported_modules(*args)
        assert "gpulint.cli" in modules
        assert not heavy(modules), (args, sorted(heavy(modules)))
    rules = imported_modules("rules")  # the rule registry is libcst visitors; nothing else is needed
    assert not {
        m for m in heavy(rules) if m.startswith(("gpulint.runtime_check", "gpulint.review", "torch", "tensorflow"))
    }


def test_parsing_a_command_line_imports_no_heavy_module():
    code = (
        "import json, sys\n"
        "from gpulint.cli import parse\n"
        "parse(['rules', '--enabled', '--select', 'GL1'])\n"
        "parse(['rule', 'GL101'])\n"
        "parse(['train.py', '--fix', '--select', 'GL1,GL2'])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    modules = set(json.loads(result.stdout))
    assert {"gpulint.cli", "gpulint.cli.check", "gpulint.cli.rules"} <= modules
    assert not heavy(modules), sorted(heavy(modules))


def test_parsed_command_lines():
    from gpulint.cli import parse

    check = parse(["a.py", "--fix", "b.py", "--select", "GL1,GL2", "--select", "GL7", "--no-unsafe-fixes"])
    assert [str(p) for p in check.paths] == ["a.py", "b.py"] and check.fix and check.unsafe_fixes is False
    assert check.select == ["GL1", "GL2", "GL7"] and check.ignore is None and check.output_format is None
    assert parse([]).paths == [] and parse([]).run.__name__ == "check"
    profile = parse(["profile", "--steps", "3", "--", "python", "train.py", "--steps", "9"])
    assert profile.steps == 3 and profile.command[-4:] == ["python", "train.py", "--steps", "9"]
    assert parse(["profile", "python", "-m", "pkg.train", "--lr", "3"]).command == [
        "python",
        "-m",
        "pkg.train",
        "--lr",
        "3",
    ]
    verify = parse(["verify", "train.py", "--runs", "2", "--", "--epochs", "3"])
    assert (str(verify.script), verify.script_args, verify.runs) == ("train.py", ["--epochs", "3"], 2)


def _usage_error(args: list[str], capsys) -> str:
    """The last line of the usage error `gpulint ARGS` exits 2 with."""
    from tests.helpers import run_cli

    code, out, err = run_cli(args, capsys)
    assert (code, out) == (2, ""), err
    return err.splitlines()[-1]


def test_a_mistyped_option_names_the_closest_one(capsys):
    assert _usage_error(["a.py", "--fixx"], capsys) == (
        "gpulint check: error: unrecognized arguments: --fixx (did you mean --fix?)"
    )
    assert _usage_error(["--unsafe-fix", "a.py"], capsys).endswith("(did you mean --unsafe-fixes?)")
    assert _usage_error(["rules", "--selct=GL1"], capsys).endswith("--selct=GL1 (did you mean --select?)")
    assert _usage_error(["check", "--fixx", "--statisticz"], capsys).endswith(
        "(did you mean --fix for --fixx, --statistics for --statisticz?)"
    )
    assert _usage_error(["profile", "--timout", "5", "--", "python", "t.py"], capsys).endswith(
        "(did you mean --timeout?)"
    )
    assert _usage_error(["a.py", "--nonsense-flag"], capsys).endswith("unrecognized arguments: --nonsense-flag")


@pytest.mark.parametrize("command", [["check", "a.py"], ["rules"], ["test-rules"]])
@pytest.mark.parametrize("empty", ["", " , "])
def test_an_empty_selection_is_a_usage_error(capsys, command, empty):
    # (it would select no rule: a check would say "All checks passed!" having checked nothing)
    assert "argument --select: an empty selection selects no rule" in _usage_error(
        [*command, "--select", empty], capsys
    )


def _summary_counts(text: str) -> dict[str, int]:
    """The numbers of the summary lines: found (or remaining), fixable, more with --unsafe-fixes, fixed."""
    import re

    patterns = {
        "found": r"Found (\d+) (?:remaining )?problems?",
        "fixable": r"(\d+) fixable with --fix",
        "unsafe": r"(\d+) more with --unsafe-fixes",
        "fixed": r"Fixed (\d+) problems?",
    }
    counts = {}
    for key, pattern in patterns.items():
        match = re.search(pattern, text)
        counts[key] = int(match.group(1)) if match else 0
    return counts


@pytest.mark.parametrize("unsafe", [False, True])
def test_fix_counts_add_up_to_what_check_found(tmp_path, unsafe):
    # In these scripts a fix removes two findings (the overlapping fix is never applied), or makes
    # a finding that the next pass fixes (pinned memory, then `non_blocking=True`): the summary
    # counts findings, so the hint, "Fixed" and what remains agree.
    for source in (
        "fixtures/keras_image_classification.py",
        "fixtures/pytorch_image_classification.py",
        "fixtures/runtime/torch_loader_any_device.py",
        "tests/fixed_scripts/train_main.py",
        "tests/fixed_scripts/tf_custom_loop.py",
    ):
        (tmp_path / source.rsplit("/", 1)[1]).write_bytes((ROOT / source).read_bytes())
    before = gpulint("--no-cache", ".", cwd=tmp_path)
    found = _summary_counts(before.stdout.decode())
    assert found["found"] and found["unsafe"], before.stdout.decode()
    fix_options = ["--fix", "--unsafe-fixes"] if unsafe else ["--fix"]
    fixing = gpulint("--no-cache", *fix_options, "--show-fixes", ".", cwd=tmp_path)
    after = _summary_counts(fixing.stdout.decode())
    promised = found["fixable"] + (found["unsafe"] if unsafe else 0)
    assert after["fixed"] == promised, fixing.stdout.decode()
    assert after["fixed"] + after["found"] == found["found"], fixing.stdout.decode()
    listed = sum(int(line.split("×")[0]) for line in fixing.stdout.decode().splitlines() if "×" in line)
    assert listed == after["fixed"]  # --show-fixes lists the same problems, by rule
    again = _summary_counts(gpulint("--no-cache", ".", cwd=tmp_path).stdout.decode())
    assert again["found"] == after["found"]


def test_the_runtime_docs_open_with_a_quick_start_whose_commands_parse():
    import re
    import shlex

    from gpulint.cli import parse

    doc = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    sections = doc.split("\n## ")
    assert sections[1].startswith("Quick start\n")  # the first section, before the reference
    quick = sections[1]
    commands = [shlex.split(line) for line in re.findall(r"^\s*\$ gpulint (.+)$", quick, re.M)]
    assert [words[0] for words in commands] == ["profile", "verify"]
    for words in commands:
        parse(words)  # (exits 2 on a command line that does not parse)
    assert len(quick.splitlines()) < 80  # a quick start, not a second reference
