"""What a user installs: the built wheel works on its own, the README lists every setting, and the
docs links of every output follow one setting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint import DOCS_URL_VARIABLE, __version__, docs_url
from gpulint.linter.config import STANDARD_KEYS
from gpulint.rules import rule_options
from tests.helpers import FIXTURES, ROOT

FIXTURE = FIXTURES / "pytorch_image_classification.py"


def test_readme_configuration_lists_every_key():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    listed = {line.split("=", 1)[0].strip() for line in block.splitlines() if "=" in line and not line.startswith("[")}
    expected = (STANDARD_KEYS - {"extend-exclude"}) | set(rule_options())
    assert expected <= listed, sorted(expected - listed)


def test_docs_url_is_one_setting(monkeypatch):
    monkeypatch.delenv(DOCS_URL_VARIABLE, raising=False)
    assert docs_url("GL101").endswith("/docs/rules/GL101.md")
    monkeypatch.setenv(DOCS_URL_VARIABLE, "https://docs.example.com/gpulint/")
    assert docs_url("GL101") == "https://docs.example.com/gpulint/rules/GL101.md"
    monkeypatch.setenv(DOCS_URL_VARIABLE, "https://example.com/{name}.html#{code}")
    assert docs_url("GL101", "dataloader-serial") == "https://example.com/dataloader-serial.html#GL101"


def test_every_output_links_to_the_configured_docs(tmp_path):
    env = {**os.environ, DOCS_URL_VARIABLE: "https://mirror.example.com/gpulint-docs"}
    # A copy: a project of one file (linted in place, the fixture's project would be this whole
    # repository, indexed again by each of the runs).
    script = tmp_path / FIXTURE.name
    shutil.copy(FIXTURE, script)
    base = [sys.executable, "-m", "gpulint", script.name, "--no-cache", "--exit-zero", "--format"]

    def output(fmt: str) -> str:
        run = subprocess.run([*base, fmt], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        return run.stdout

    outputs = {fmt: output(fmt) for fmt in ("json", "sarif", "rdjson")}
    found = json.loads(outputs["json"])
    assert found and all(f["url"] == f"https://mirror.example.com/gpulint-docs/rules/{f['code']}.md" for f in found)
    rules = json.loads(outputs["sarif"])["runs"][0]["tool"]["driver"]["rules"]
    assert rules and all(r["helpUri"].startswith("https://mirror.example.com/gpulint-docs/rules/") for r in rules)
    diagnostics = json.loads(outputs["rdjson"])["diagnostics"]
    assert diagnostics
    assert all(d["code"]["url"].startswith("https://mirror.example.com/gpulint-docs/rules/") for d in diagnostics)
    assert "/blob/main/docs" not in "".join(outputs.values())  # no link left at the default


@pytest.mark.slow
def test_built_wheel_installs_and_lints_in_a_clean_venv(tmp_path):
    """`python -m build` makes the sdist and, from it, the wheel; the wheel alone, in a fresh virtual
    environment and run outside the checkout, reports its version and lints a fixture as the
    checkout does."""
    pytest.importorskip("build", reason="`build` comes with the dev extra")
    dist = tmp_path / "dist"
    source = tmp_path / "source"  # a copy, so the build leaves no egg-info or build/ in the checkout
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            "*.egg-info",
            "build",
            "dist",
            "__pycache__",
            ".pytest_cache",
            ".gpulint_cache",
            ".hypothesis",
        ),
    )
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = list(dist.glob("gpulint-*.whl"))
    assert len(wheels) == 1 and list(dist.glob("gpulint-*.tar.gz"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    installed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheels[0])], capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    gpulint = str(bin_dir / "gpulint")
    version = subprocess.run([gpulint, "--version"], capture_output=True, text=True, cwd=outside)
    assert version.returncode == 0 and version.stdout.strip() == f"gpulint {__version__}"
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import gpulint; print(gpulint.__file__)"],
        capture_output=True,
        text=True,
        cwd=outside,
    ).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where

    # Both lint a copy, a project of its own (in place, each would index this whole repository).
    script = outside / FIXTURE.name
    shutil.copy(FIXTURE, script)
    linted = subprocess.run(
        [gpulint, script.name, "--no-cache", "--show-hints", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=outside,
    )
    assert linted.returncode == 1, linted.stderr
    here = subprocess.run(
        [sys.executable, "-m", "gpulint", script.name, "--no-cache", "--show-hints", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=outside,
    )
    codes = sorted((f["code"], f["location"]["row"]) for f in json.loads(linted.stdout))
    assert codes and codes == sorted((f["code"], f["location"]["row"]) for f in json.loads(here.stdout))
    assert {"GL101", "GL102"} <= {code for code, _ in codes}  # (hints by default: shown, as asked)

    rule = subprocess.run([gpulint, "rule", "GL101"], capture_output=True, text=True, cwd=outside)
    assert rule.returncode == 0 and rule.stdout.startswith("# GL101 dataloader-serial")
    server = subprocess.run([gpulint, "server"], capture_output=True, text=True, cwd=outside, stdin=subprocess.DEVNULL)
    assert server.returncode == 2 and "pip install 'gpulint[lsp]'" in server.stderr  # the extra is not installed
