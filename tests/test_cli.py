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
    device = "cuda"
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
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_exit_codes_and_text_format(project):
    result = gpulint("bad.py", "clean.py", cwd=project)
    assert result.returncode == 1
    out = result.stdout.decode()
    assert "bad.py:5:10: GL102 [*] DataLoader without `pin_memory=True`" in out
    assert "Found 1 problem (1 fixable with --fix)." in out
    clean = gpulint("clean.py", cwd=project)
    assert clean.returncode == 0 and "All checks passed!" in clean.stdout.decode()
    assert gpulint("bad.py", "--exit-zero", cwd=project).returncode == 0


def test_check_subcommand_is_the_same(project):
    assert gpulint("check", "bad.py", cwd=project).stdout == gpulint("bad.py", cwd=project).stdout


def test_json_format_is_ruff_shaped(project):
    result = gpulint("bad.py", "--format", "json", cwd=project)
    findings = json.loads(result.stdout)
    assert len(findings) == 1
    finding = findings[0]
    assert {"code", "message", "filename", "location", "end_location", "fix", "url", "name", "severity", "noqa_row", "cell"} <= set(finding)
    assert finding["code"] == "GL102" and finding["name"] == "dataloader-unpinned"
    assert finding["location"] == {"row": 5, "column": 10}
    assert finding["fix"]["applicability"] == "safe"
    edit = finding["fix"]["edits"][0]
    assert edit["content"] == "loader = DataLoader(ds, num_workers=4, pin_memory=True)\n"
    assert edit["location"] == {"row": 5, "column": 1} and edit["end_location"] == {"row": 6, "column": 1}


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
    (project / "pyproject.toml").write_text("[tool.gpulint]\nignore = ['GL102']\n")
    assert gpulint("bad.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text("[tool.gpulint]\nignor = ['GL102']\n")
    result = gpulint("bad.py", cwd=project)
    assert result.returncode == 2
    assert "unknown key(s) ignor" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_stdin(project):
    result = gpulint("-", "--stdin-filename", "train.py", stdin=BAD.encode(), cwd=project)
    assert result.returncode == 1 and "train.py:5:10: GL102" in result.stdout.decode()
    fixed = gpulint("-", "--stdin-filename", "train.py", "--fix", stdin=BAD.encode(), cwd=project)
    assert fixed.stdout.decode() == CLEAN


def test_syntax_error_file_among_good_ones(project):
    (project / "broken.py").write_text("import torch\nloader = DataLoader(ds))\nmodel.cuda()\n")
    result = gpulint(".", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "broken.py:2:24: GL000 SyntaxError" in out and "bad.py:5:10: GL102" in out
    assert "Traceback" not in result.stderr.decode()


def test_bad_inputs_get_one_line_each(project):
    (project / "undecodable.py").write_bytes(b"import torch\nx = '\xff\xfe'\nDataLoader(x)\nmodel.cuda()\n")
    (project / "loop").mkdir()
    (project / "loop" / "self").symlink_to(project / "loop")
    result = gpulint(".", "missing.py", cwd=project)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert "missing.py: no such file or directory" in err
    assert "undecodable.py: cannot decode" in err
    assert "symbolic link loop" in err
    assert "Traceback" not in err
    assert "bad.py:5:10: GL102" in result.stdout.decode()  # the run went on


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
