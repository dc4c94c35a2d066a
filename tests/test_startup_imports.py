"""Start-up pays only for what the command needs: libcst (most of the import time) only once a file
passes the prefilter, nothing of the runtime checker, the review bot or the language server for a
lint.  Checked in fresh interpreters, by what ended up in `sys.modules`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import FIXTURES

HEAVY = (
    "libcst",
    "pygls",
    "gpulint.runtime_check",
    "gpulint.review",
    "gpulint.server",
    "gpulint.rules",
    "torch",
    "tensorflow",
)

PROBE = """
import json, sys
from gpulint.cli import main
try:
    main({args!r})
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def imported(args: list[str], cwd) -> set[str]:
    run = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, cwd=cwd)
    line = run.stderr.rsplit("MODULES ", 1)[1]
    return {name for name in json.loads(line) if any(name == h or name.startswith(h + ".") for h in HEAVY)}


@pytest.mark.parametrize("args", [["--version"], ["rules"], ["rules", "--format=json"]])
def test_version_and_listings_import_nothing_heavy(tmp_path, args):
    assert imported(args, tmp_path) == set()


def test_server_help_loads_only_the_command(tmp_path):
    # the command and its default limits; not pygls, not the worker, not the linter
    assert imported(["server", "--help"], tmp_path) == {"gpulint.server", "gpulint.server.limits"}


@pytest.mark.parametrize("configuration", ["", "[tool.yapf]\nbased_on_style = 'pep8'\n", "[tool.ruff]\n"])
def test_lint_of_files_the_prefilter_rejects_never_imports_libcst(tmp_path, configuration):
    # (reading the project's settings -- its formatter's layout among them -- needs no libcst either)
    if configuration:
        (tmp_path / "pyproject.toml").write_text(configuration)
    (tmp_path / "utils.py").write_text("import os\n\n\ndef read(path):\n    return open(path).read()\n")
    (tmp_path / "model.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    assert imported(["--no-cache", str(tmp_path)], tmp_path) == set()


def test_a_training_file_does_import_libcst(tmp_path):
    heavy = imported(["--no-cache", str(FIXTURES / "pytorch_image_classification.py")], tmp_path)
    assert "libcst" in heavy  # the probe can see an import: the test above is not vacuous
    assert not {m for m in heavy if m.startswith(("gpulint.runtime_check", "gpulint.review", "gpulint.server"))}


def test_a_lint_imports_only_the_rules_that_may_fire_on_its_files(tmp_path):
    # a torch module that builds a loader, on no accelerator and with no training step: only the
    # loader rules may fire (the others' facts or tokens are not there)
    (tmp_path / "data.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(dataset, batch_size=8)\n"
    )
    rules = {m for m in imported(["--no-cache", str(tmp_path / "data.py")], tmp_path) if m.startswith("gpulint.rules.")}
    assert "gpulint.rules.data_pipeline.dataloader_serial" in rules
    assert not {
        m
        for m in rules
        if m.startswith(("gpulint.rules.syncs.", "gpulint.rules.per_step.", "gpulint.rules.tensorflow."))
    }


@pytest.mark.parametrize("flag", ["--format=json", "--format=sarif", "--statistics"])
def test_reports_of_a_clean_run_need_no_rules(tmp_path, flag):
    (tmp_path / "utils.py").write_text("import os\n")
    assert imported(["--no-cache", flag, str(tmp_path)], tmp_path) == set()


# Describing rules reads the catalog: the settings' catalog and SARIF's rule help import no rule.
DESCRIBE_PROBE = """
import json, sys
from gpulint.linter.config import Settings
from gpulint.linter.engine import FileResult
from gpulint.linter.findings import Finding, Location
from gpulint.linter.reporters.sarif import to_sarif
from gpulint.linter.run.outcome import FileOutcome, RunResult

entries = Settings().catalog()
finding = Finding(
    code="GL101", name="dataloader-serial", message="DataLoader loads batches in the training process",
    path="train.py", location=Location(1, 1), end_location=Location(1, 2), severity="warning",
)
document = to_sarif(RunResult([FileOutcome(FileResult("train.py", [finding]))]))
print(json.dumps({
    "entries": len(entries),
    "rules": document["runs"][0]["tool"]["driver"]["rules"],
    "modules": sorted(m for m in sys.modules if m == "gpulint.rules" or m.startswith("gpulint.rules.")),
}))
"""


def test_the_catalog_and_sarif_rule_help_import_no_rule(tmp_path):
    run = subprocess.run([sys.executable, "-c", DESCRIBE_PROBE], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    described = json.loads(run.stdout)
    assert described["modules"] == []
    assert described["entries"] >= 30
    (rule,) = described["rules"]
    assert rule["id"] == "GL101" and rule["name"] == "dataloader-serial"
    assert rule["help"]["markdown"].startswith("## What it finds")
    assert "GL101" in rule["helpUri"]


def test_sarif_rule_help_is_what_the_rule_classes_say():
    from gpulint.linter.reporters.sarif import _rule_descriptor
    from gpulint.rules import all_rules

    for rule in all_rules():
        described = _rule_descriptor(rule.code, rule.name, rule.message)
        assert described["shortDescription"]["text"] == rule.short_description()
        assert described["help"] == {"text": rule.summary(), "markdown": rule.explanation()}
        assert described["properties"]["fix"] == (rule.fix_applicability.value if rule.fix_applicability else "none")
