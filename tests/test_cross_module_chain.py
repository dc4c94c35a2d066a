"""A finding that another module's training loop makes run every step names that loop and each call
on the way to it, in every format, and keeps the chain through the result cache and worker
processes."""

from __future__ import annotations

import json
import pickle
import textwrap
from pathlib import Path

import jsonschema
import pytest

from gpulint.linter.findings import Finding
from tests.helpers import SCHEMAS, run_cli

# The loop is in train.py; the host reads are one-line helpers of utils.py, reached directly
# (`scalar`) and through another helper (`step` -> `log_loss`).  model.py and data.py make four files,
# enough for a run with `--jobs 2` to use worker processes.
TRAIN = """\
import torch

from utils import scalar, step

DEVICE = "cuda"


def train(model, loader, optimizer):
    history = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.to(DEVICE)), y.to(DEVICE))
        loss.backward()
        history.append(scalar(loss))
        step(optimizer, loss)
    return history
"""
UTILS = """\
import torch

DEVICE = "cuda"


def scalar(t):
    return t.item()


def log_loss(loss):
    return loss.item()


def step(optimizer, loss):
    optimizer.step()
    optimizer.zero_grad()
    return log_loss(loss)
"""
MODEL = "import torch\n\n\ndef build():\n    return torch.nn.Linear(4, 2)\n"
DATA = "import torch\n\n\ndef batches():\n    return [torch.zeros(4)]\n"

# (the helper's row, the notes it carries)
SCALAR_ROW, SCALAR_CHAIN = 7, ["called from train.py:13 in the training loop at train.py:10"]
LOG_LOSS_ROW, LOG_LOSS_CHAIN = (
    11,
    ["called from train.py:14 in the training loop at train.py:10", "via utils.py:17 in `step()`"],
)


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    for name, text in (("train.py", TRAIN), ("utils.py", UTILS), ("model.py", MODEL), ("data.py", DATA)):
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _lint(capsys, *args: str) -> str:
    code, out, err = run_cli(["--select", "GL201", *args, "."], capsys)
    assert code == 1, err
    return out


def _json(capsys, *args: str) -> list[dict]:
    return json.loads(_lint(capsys, "--output-format", "json", *args))


def _chains(findings: list[dict]) -> dict[tuple[str, int], list[str]]:
    return {(Path(f["filename"]).name, f["location"]["row"]): [r["message"] for r in f["related"]] for f in findings}


def test_json_carries_the_chain_with_its_locations(project, capsys):
    findings = _json(capsys, "--no-cache")
    assert _chains(findings) == {("utils.py", SCALAR_ROW): SCALAR_CHAIN, ("utils.py", LOG_LOSS_ROW): LOG_LOSS_CHAIN}
    log_loss = next(f for f in findings if f["location"]["row"] == LOG_LOSS_ROW)
    places = [(Path(r["filename"]).name, r["location"]["row"], r["location"]["column"]) for r in log_loss["related"]]
    assert places == [("train.py", 14, 9), ("utils.py", 17, 12)]
    assert all(Path(r["filename"]).is_absolute() for r in log_loss["related"])  # as `filename` is
    # The ruff-shaped fields are there as before.
    assert {"code", "message", "filename", "location", "end_location", "fix", "noqa_row", "url"} <= set(log_loss)


@pytest.mark.parametrize("fmt", ["concise", "full"])
def test_text_shows_an_indented_note_per_call(project, capsys, fmt):
    lines = _lint(capsys, "--no-cache", "--output-format", fmt).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"utils.py:{LOG_LOSS_ROW}:"))
    notes = [line for line in lines[head + 1 :] if "= note:" in line][:2]
    assert [note.split("= note: ")[1] for note in notes] == LOG_LOSS_CHAIN
    assert all(note.startswith(" ") for note in notes)
    if fmt == "concise":  # right under the finding
        assert lines[head + 1 : head + 3] == [f"  = note: {message}" for message in LOG_LOSS_CHAIN]


def test_sarif_has_related_locations_and_validates(project, capsys):
    document = json.loads(_lint(capsys, "--no-cache", "--output-format", "sarif"))
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(document))
    assert not errors, errors[0].message
    result = next(
        r
        for r in document["runs"][0]["results"]
        if r["locations"][0]["physicalLocation"]["region"]["startLine"] == LOG_LOSS_ROW
    )
    related = result["relatedLocations"]
    assert [r["message"]["text"] for r in related] == LOG_LOSS_CHAIN
    assert [
        (r["physicalLocation"]["artifactLocation"]["uri"], r["physicalLocation"]["region"]["startLine"])
        for r in related
    ] == [("train.py", 14), ("utils.py", 17)]


def test_rdjson_has_related_locations_and_validates(project, capsys):
    document = json.loads(_lint(capsys, "--no-cache", "--output-format", "rdjson"))
    schema = json.loads((SCHEMAS / "rdjson-DiagnosticResult.json").read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft4Validator(schema).iter_errors(document))
    assert not errors, errors[0].message
    diagnostic = next(d for d in document["diagnostics"] if d["location"]["range"]["start"]["line"] == LOG_LOSS_ROW)
    related = diagnostic["related_locations"]
    assert [r["message"] for r in related] == LOG_LOSS_CHAIN
    assert [(r["location"]["path"], r["location"]["range"]["start"]["line"]) for r in related] == [
        ("train.py", 14),
        ("utils.py", 17),
    ]


def test_github_annotation_names_the_caller(project, capsys):
    annotation = next(
        line for line in _lint(capsys, "--no-cache", "--output-format", "github").splitlines() if "line=11," in line
    )
    assert annotation.endswith("%0A" + "%0A".join(LOG_LOSS_CHAIN))


def test_cached_and_parallel_runs_give_the_same_chain(project, capsys):
    expected = {("utils.py", SCALAR_ROW): SCALAR_CHAIN, ("utils.py", LOG_LOSS_ROW): LOG_LOSS_CHAIN}
    cache = ["--cache-dir", str(project / "cache")]
    assert _chains(_json(capsys, *cache, "--jobs", "1")) == expected  # writes the cache
    assert list((project / "cache").rglob("*"))
    assert _chains(_json(capsys, *cache, "--jobs", "1")) == expected  # read back from it
    assert _chains(_json(capsys, "--no-cache", "--jobs", "2")) == expected
    assert _chains(_json(capsys, *cache, "--jobs", "2")) == expected
    # A caller that moves re-lints the helper: the cached chain would name the old line.
    (project / "train.py").write_text(TRAIN.replace("    history = []\n", "    history = []\n\n"))
    moved = _chains(_json(capsys, *cache))[("utils.py", SCALAR_ROW)]
    assert moved == ["called from train.py:14 in the training loop at train.py:11"]


def _findings(project: Path) -> list[Finding]:
    from gpulint.linter.config import Settings
    from gpulint.linter.run.outcome import RunOptions
    from gpulint.linter.run.runner import run

    result = run([project], Settings(select=["GL201"]), RunOptions())
    return sorted(result.findings, key=Finding.sort_key)


def test_the_language_server_gives_related_information(project):
    pytest.importorskip("pygls", reason="the language server needs the `lsp` extra (pygls)")
    from pygls.workspace import TextDocument

    from gpulint.server.engine_adapter import _problem
    from gpulint.server.lsp import GpulintServer

    finding = next(f for f in _findings(project) if f.location.row == LOG_LOSS_ROW)
    problem = pickle.loads(pickle.dumps(_problem(finding)))  # (as the worker process replies)
    uri = (project / "utils.py").as_uri()
    document = TextDocument(uri, UTILS)
    diagnostic = GpulintServer()._diagnostic(document, document.lines, problem)
    related = diagnostic.related_information
    assert related is not None
    assert [r.message for r in related] == LOG_LOSS_CHAIN
    assert [(r.location.uri, r.location.range.start.line) for r in related] == [
        ((project / "train.py").as_uri(), 13),
        ((project / "utils.py").as_uri(), 16),
    ]


def test_the_language_server_lints_with_the_project_index_as_the_docs_say(project):
    from gpulint.server.engine_adapter import Project

    # utils.py as an editor holds it (a line added above the helpers, not saved): the loop in
    # train.py, read from disk, still explains its host reads
    (project / "pyproject.toml").write_text('[project]\nname = "trainer"\n')  # (where the project starts)
    edited = "# edited\n" + UTILS
    report = Project(None, facts_file=None).lint(edited, str(project / "utils.py"))
    chains = {p.start[0]: [message for *_, message in p.related] for p in report.problems if p.code == "GL201"}
    moved = [note.replace("utils.py:17", "utils.py:18") for note in LOG_LOSS_CHAIN]  # (the edited lines)
    assert chains == {SCALAR_ROW + 1: SCALAR_CHAIN, LOG_LOSS_ROW + 1: moved}
    # ... which both documents say
    docs = Path(__file__).resolve().parent.parent / "docs"
    server_row = next(
        line for line in (docs / "integrations.md").read_text().splitlines() if line.startswith("| language server |")
    )
    assert "with the project index" in server_row and "on its own" not in server_row
    assert "linted with its view of its whole project (the project index" in " ".join(
        (docs / "editors.md").read_text().split()
    )


def test_a_review_comment_says_where_it_is_called_from(project):
    from gpulint.review.comments import make_comments

    finding = next(f for f in _findings(project) if f.location.row == LOG_LOSS_ROW)
    [comment] = make_comments("utils.py", [(finding, "0" * 32)], tuple(UTILS.splitlines()), {LOG_LOSS_ROW}, _no_fix)
    assert f"Runs every step: {'; '.join(LOG_LOSS_CHAIN)}." in comment.body


def _no_fix(unsafe: bool) -> None:
    return None


def test_a_finding_its_own_module_explains_has_no_chain(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch


            def train(model, loader, optimizer):
                model.cuda()
                for x in loader:
                    loss = model(x.cuda()).sum()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    findings = _json(capsys, "--no-cache")
    assert [(f["location"]["row"], f["related"]) for f in findings] == [(10, [])]


def test_a_helper_that_reads_back_a_value_the_loop_appends_is_found(tmp_path, monkeypatch, capsys):
    """`history.append(scalar(loss))` every step, `scalar(t)` returning `t.item()` in a module that
    imports nothing: the helper works on the loop's tensors, on the loop's device."""
    (tmp_path / "metrics.py").write_text("def scalar(t):\n    return t.item()\n")
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from metrics import scalar


            def train(model, loader, optimizer):
                model.cuda()
                history = []
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
                    history.append(scalar(loss))
                return history
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    findings = _json(capsys, "--no-cache")
    assert _chains(findings) == {("metrics.py", 2): ["called from train.py:13 in the training loop at train.py:9"]}


def test_a_helper_of_a_loop_that_names_no_accelerator_stays_silent(tmp_path, monkeypatch, capsys):
    """The same helper run by a loop on the host (nothing names a device): no GPU to wait for."""
    (tmp_path / "metrics.py").write_text("def scalar(t):\n    return t.item()\n")
    (tmp_path / "train.py").write_text(
        "import torch\n\nfrom metrics import scalar\n\n\n"
        "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        loss = model(x, y)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        print(scalar(loss))\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["--select", "GL201", "--no-cache", "--output-format", "json", "."], capsys)
    assert (code, json.loads(out)) == (0, []), err


def test_a_call_after_other_text_on_its_line_is_placed_in_code_points(project, capsys):
    """`ast` counts columns in UTF-8 bytes; findings (and SARIF's `unicodeCodePoints`) count code
    points."""
    (project / "train.py").write_text(TRAIN.replace("step(optimizer, loss)", 'print("Δé", step(optimizer, loss))'))
    log_loss = next(f for f in _json(capsys, "--no-cache") if f["location"]["row"] == LOG_LOSS_ROW)
    assert log_loss["related"][0]["location"] == {"row": 14, "column": 21}  # after `print("Δé", `


def _index(project: Path, sources: dict[Path, bytes] | None = None, previous=None):
    from gpulint.linter.run.project import RunIndex

    files = [project / name for name in ("train.py", "utils.py", "model.py", "data.py")]
    return RunIndex([project / "utils.py"], project=files, sources=sources, previous=previous)


@pytest.mark.parametrize("edited", ["train.py", "utils.py"])
def test_an_edit_that_moves_lines_keeps_the_solution_and_names_the_new_lines(project, monkeypatch, edited):
    """An editor re-indexes the project on every edit; one that only adds or removes lines moves
    calls and loops without changing what is per step: the index is not solved again, and the
    chains say where the calls are now, as a fresh index does."""
    from gpulint.linter.analysis.project import ProjectIndex

    first = _index(project)
    solved: list[int] = []
    solve = ProjectIndex._solve
    monkeypatch.setattr(ProjectIndex, "_solve", lambda self: solved.append(1) or solve(self))
    moved = {project / edited: b"# two lines\n# added above\n" + (project / edited).read_bytes()}
    again = _index(project, moved, previous=first)
    assert solved == []
    fresh = _index(project, moved)
    assert solved == [1]
    utils = project / "utils.py"
    assert again.view(utils) == fresh.view(utils) != first.view(utils)
    assert ("via utils.py:19" if edited == "utils.py" else "called from train.py:16") in str(
        again.view(utils).to_data()
    )


def test_an_edit_that_changes_a_call_is_solved_again(project, monkeypatch):
    from gpulint.linter.analysis.project import ProjectIndex

    first = _index(project)
    solved: list[int] = []
    solve = ProjectIndex._solve
    monkeypatch.setattr(ProjectIndex, "_solve", lambda self: solved.append(1) or solve(self))
    changed = {project / "train.py": TRAIN.replace("step(optimizer, loss)", "optimizer.step()").encode()}
    again = _index(project, changed, previous=first)
    assert solved == [1]
    utils = project / "utils.py"
    assert again.view(utils) == _index(project, changed).view(utils) != first.view(utils)
