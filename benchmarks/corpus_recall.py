"""Precision and recall of gpulint on a labelled corpus of real training code.

    .venv/bin/python benchmarks/corpus_recall.py CORPUS_ROOT            # table, misses, false positives
    .venv/bin/python benchmarks/corpus_recall.py CORPUS_ROOT --json     # the same as one JSON document
    .venv/bin/python benchmarks/corpus_recall.py CORPUS_ROOT --default-output   # what a default run prints
    .venv/bin/python benchmarks/corpus_recall.py --fetch-commands       # shell commands that build CORPUS_ROOT
    .venv/bin/python benchmarks/corpus_recall.py CORPUS_ROOT --stamp    # fill in missing `text_sha1` of labels

The corpus itself is not in the repository (other projects' code, other licences): `tests/corpus/`
holds the manifest (repositories, commits, files) and the labels (see tests/corpus/README.md).
CORPUS_ROOT holds one folder per repository, `<owner>__<name>/`, checked out at the manifest's commit.

gpulint (its CLI: `--select ALL --show-hints --format json --no-cache`: findings held back as hints
included, each with its `hint`) runs once over the listed files -- with `--default-output`, only the
findings a default run prints are scored: those of the rules on by default that are not hints (held
back by default, or by the rule for want of evidence) -- and every finding is matched to a
label of the same file and rule: on the same line, or in the same statement (a label may anchor on
any line of a multi-line call), or -- for the rules reported once per module (GL401, GL403, GL404)
-- anywhere in the file.  A finding is a true positive when it matches a positive label, a false
positive when it matches a tricky-negative label *or no label at all* (an unlabelled finding counts
against precision until someone labels it), and a positive label that no finding matches is a
miss.  Several findings of one rule on one line, or on one positive label's statement, count once.

Each label carries the sha1 of its line's stripped text: when the file has drifted, the label moves
to the nearest line with that text, or is reported as stale and left out.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpulint.rules import all_rules  # noqa: E402 - the project's own package

CORPUS_DIR = REPO / "tests" / "corpus"
# Rules reported once per module, at a line of the rule's choosing: matched by file, not by line.
MODULE_RULES = frozenset({"GL401", "GL403", "GL404"})
KINDS = ("positive", "tricky-negative")
SCOPES = ("single-file", "cross-file")
HASH_CHARS = 10


def line_hash(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:HASH_CHARS]


def repo_folder(repo: str) -> str:
    """`owner/name` -> the folder name under the corpus root."""
    return repo.replace("/", "__")


@dataclass
class Label:
    repo: str
    commit: str
    path: str
    line: int
    rule: str
    kind: str
    scope: str
    reason: str
    cell: int | None = None  # notebooks: 1-based index among all cells, as gpulint reports it
    text_sha1: str = ""

    @property
    def file_key(self) -> tuple[str, str]:
        return (self.repo, self.path)

    def where(self) -> str:
        cell = f"#cell{self.cell}" if self.cell is not None else ""
        return f"{self.repo}/{self.path}{cell}:{self.line}"


@dataclass
class Finding:
    repo: str
    path: str
    cell: int | None
    line: int
    rule: str
    message: str

    @property
    def file_key(self) -> tuple[str, str]:
        return (self.repo, self.path)

    def where(self) -> str:
        cell = f"#cell{self.cell}" if self.cell is not None else ""
        return f"{self.repo}/{self.path}{cell}:{self.line}"


def load_labels(path: Path) -> list[Label]:
    labels = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        label = Label(**json.loads(raw))
        if label.kind not in KINDS or label.scope not in SCOPES:
            raise ValueError(f"{path}:{number}: kind must be one of {KINDS} and scope one of {SCOPES}")
        labels.append(label)
    return labels


def write_labels(path: Path, labels: list[Label]) -> None:
    lines = [json.dumps(asdict(label), ensure_ascii=False) for label in labels]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- sources: line text and statement spans ------------------------------------------------------


class SourceFile:
    """One corpus file: the text of each cell (a .py file is one cell, `None`) and statement spans."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.suffix == ".ipynb":
            notebook = json.loads(path.read_text(encoding="utf-8"))
            self.cells = {
                index: _cell_text(cell)
                for index, cell in enumerate(notebook.get("cells", []), 1)
                if cell.get("cell_type") == "code"
            }
        else:
            self.cells = {None: path.read_text(encoding="utf-8", errors="replace")}
        self._statements: dict[int | None, dict[int, tuple[int, int]]] = {}

    def lines(self, cell: int | None) -> list[str]:
        return self.cells.get(cell, "").splitlines()

    def line_text(self, cell: int | None, line: int) -> str | None:
        lines = self.lines(cell)
        return lines[line - 1] if 1 <= line <= len(lines) else None

    def statement(self, cell: int | None, line: int) -> tuple[int, int] | None:
        """The span (first, last line) of the innermost statement (a compound one: its header) on `line`."""
        if cell not in self._statements:
            self._statements[cell] = _statement_spans(self.cells.get(cell, ""))
        return self._statements[cell].get(line)


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


_MAGIC = re.compile(r"^(\s*)[%!]")


def _statement_spans(text: str) -> dict[int, tuple[int, int]]:
    # IPython magics and shell escapes are not Python: blank them (same line count) before parsing.
    lines = text.splitlines()
    source = "\n".join(magic.group(1) + "pass" if (magic := _MAGIC.match(line)) else line for line in lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        body = getattr(node, "body", None)
        compound = isinstance(body, list) and body and body[0].lineno > node.lineno
        last = body[0].lineno - 1 if compound else node.end_lineno  # a compound statement: its header only
        for line in range(first, max(first, last) + 1):
            known = spans.get(line)
            if known is None or (last - first) < (known[1] - known[0]):
                spans[line] = (first, last)
    return spans


# -- drift ---------------------------------------------------------------------------------------


def relocate(label: Label, source: SourceFile) -> int | None:
    """The label's line if its text still hashes the same, else the nearest line that does, else None."""
    if line_hash(source.line_text(label.cell, label.line) or "") == label.text_sha1:
        return label.line
    candidates = [n for n, text in enumerate(source.lines(label.cell), 1) if line_hash(text) == label.text_sha1]
    return min(candidates, key=lambda n: abs(n - label.line)) if candidates else None


# -- running gpulint -----------------------------------------------------------------------------


def run_gpulint(paths: list[Path], jobs: int | None) -> list[dict]:
    """gpulint's JSON records for `paths`, every rule selected, no cache."""
    command = [
        sys.executable,
        "-m",
        "gpulint",
        "check",
        "--select",
        "ALL",
        "--show-hints",
        "--format",
        "json",
        "--no-cache",
        "--exit-zero",
        *(["--jobs", str(jobs)] if jobs else []),
        *map(str, paths),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"gpulint exited {completed.returncode}:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout)


def default_output(records: list[dict]) -> list[dict]:
    """The records a default run prints: of the rules on by default, the findings that are not hints."""
    on = {rule.code for rule in all_rules() if rule.default == "on"}
    return [record for record in records if record["code"] in on and record.get("hint") is None]


def findings_from_json(records: list[dict], root: Path, repos: list[str]) -> list[Finding]:
    """gpulint's JSON records -> findings keyed by repository and path under the corpus root."""
    by_folder = {repo_folder(repo): repo for repo in repos}
    findings = []
    for record in records:
        relative = Path(record["filename"]).resolve().relative_to(root.resolve())
        repo, path = by_folder[relative.parts[0]], Path(*relative.parts[1:]).as_posix()
        findings.append(
            Finding(repo, path, record.get("cell"), record["location"]["row"], record["code"], record["message"])
        )
    return findings


# -- matching ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the corpus says about gpulint: every finding classified, every positive label met or missed."""

    true_positives: list[tuple[Finding, Label]] = field(default_factory=list)
    tricky_hits: list[tuple[Finding, Label]] = field(default_factory=list)
    unlabelled: list[Finding] = field(default_factory=list)
    misses: list[Label] = field(default_factory=list)
    stale: list[Label] = field(default_factory=list)  # the labelled line's text is nowhere in the file


def evaluate(labels: list[Label], findings: list[Finding], sources: dict[tuple[str, str], SourceFile]) -> Outcome:
    """Relocate the labels in the current sources, then classify each finding (duplicates of one rule on
    one line once; further findings on a positive label already met add nothing)."""
    outcome = Outcome()
    live: list[Label] = []
    for label in labels:
        source = sources.get(label.file_key)
        line = relocate(label, source) if source is not None else None
        if line is None:
            outcome.stale.append(label)
            continue
        if line != label.line:
            label = Label(**{**asdict(label), "line": line})
        live.append(label)

    by_file_rule: dict[tuple, list[Label]] = defaultdict(list)
    for label in live:
        by_file_rule[(label.file_key, label.rule)].append(label)

    matched: set[int] = set()
    seen: set[tuple] = set()
    for finding in sorted(findings, key=lambda f: (f.repo, f.path, f.cell or 0, f.line, f.rule)):
        key = (finding.file_key, finding.cell, finding.line, finding.rule)
        if key in seen:
            continue
        seen.add(key)
        label = _match(finding, by_file_rule.get((finding.file_key, finding.rule), []), sources)
        if label is None:
            outcome.unlabelled.append(finding)
        elif label.kind == "positive":
            if id(label) not in matched:
                outcome.true_positives.append((finding, label))
            matched.add(id(label))
        else:
            outcome.tricky_hits.append((finding, label))
    outcome.misses = [label for label in live if label.kind == "positive" and id(label) not in matched]
    return outcome


def _match(finding: Finding, candidates: list[Label], sources: dict) -> Label | None:
    if finding.rule in MODULE_RULES:
        return min(candidates, key=lambda label: (label.kind != "positive", label.line), default=None)
    same_cell = [label for label in candidates if label.cell == finding.cell]
    for label in same_cell:
        if label.line == finding.line:
            return label
    source = sources.get(finding.file_key)
    statement = source.statement(finding.cell, finding.line) if source else None
    if statement is None:
        return None
    for label in same_cell:
        if source.statement(label.cell, label.line) == statement:
            return label
    return None


# -- figures -------------------------------------------------------------------------------------


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def _counts(outcome: Outcome, rules: set[str]) -> dict:
    """TP/FP/FN, precision and recall over `rules`; the `_single` figures leave out every finding and
    label whose verdict needs another module (a cross-file label), as a single-file linter would see it.
    An unlabelled finding counts as a single-file false positive."""
    tps = [label for _, label in outcome.true_positives if label.rule in rules]
    tricky = [label for finding, label in outcome.tricky_hits if finding.rule in rules]
    unlabelled = sum(1 for finding in outcome.unlabelled if finding.rule in rules)
    misses = [label for label in outcome.misses if label.rule in rules]
    tp, fp, fn = len(tps), len(tricky) + unlabelled, len(misses)
    counts = {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tricky_hits": len(tricky),
        "unlabelled": unlabelled,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
    }
    for scope in SCOPES:
        short = scope.split("-")[0]
        scope_tp = sum(label.scope == scope for label in tps)
        scope_fn = sum(label.scope == scope for label in misses)
        counts[f"recall_{short}"] = _ratio(scope_tp, scope_tp + scope_fn)
        counts[f"positives_{short}"] = scope_tp + scope_fn
    single_tp = sum(label.scope == "single-file" for label in tps)
    single_fp = sum(label.scope == "single-file" for label in tricky) + unlabelled
    counts["precision_single"] = _ratio(single_tp, single_tp + single_fp)
    return counts


def summarize(outcome: Outcome, labels: list[Label], files: int) -> dict:
    catalog = {rule.code: rule for rule in all_rules()}
    core = {code for code, rule in catalog.items() if rule.default == "on"}
    seen_rules = sorted({label.rule for label in labels} | {f.rule for f in outcome.unlabelled})
    return {
        "files": files,
        "labels": {
            "positive": sum(label.kind == "positive" for label in labels),
            "tricky-negative": sum(label.kind == "tricky-negative" for label in labels),
            "stale": len(outcome.stale),
        },
        "core_rules": sorted(core),
        "per_rule": {code: _counts(outcome, {code}) for code in seen_rules},
        "core": _counts(outcome, core),
        "full": _counts(outcome, set(catalog) | set(seen_rules)),
        "misses": [
            {"where": label.where(), "rule": label.rule, "scope": label.scope, "reason": label.reason}
            for label in outcome.misses
        ],
        "false_positives": (
            [
                {"where": f.where(), "rule": f.rule, "label": "tricky-negative", "reason": label.reason}
                for f, label in outcome.tricky_hits
            ]
            + [
                {"where": f.where(), "rule": f.rule, "label": "unlabelled", "reason": f.message}
                for f in outcome.unlabelled
            ]
        ),
        "stale": [{"where": label.where(), "rule": label.rule} for label in outcome.stale],
    }


def render_text(summary: dict) -> str:
    def fmt(value):
        return "-" if value is None else f"{value:.2f}"

    out = [
        f"{summary['files']} files, {summary['labels']['positive']} positive and "
        f"{summary['labels']['tricky-negative']} tricky-negative labels ({summary['labels']['stale']} stale)",
        "",
    ]
    out.append("precision and recall: all labels, then single-file only (`1f`); recall of cross-file positives (`xf`)")
    out.append(
        f"{'rule':<7} {'TP':>4} {'FP':>4} {'FN':>4}  {'prec':>5} {'prec1f':>6}  {'recall':>6} {'rec1f':>6} {'recxf':>6}"
    )
    rows = list(summary["per_rule"].items()) + [("core", summary["core"]), ("full", summary["full"])]
    for name, c in rows:
        if name == "core":
            out.append("-" * 62)
        out.append(
            f"{name:<7} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4}  {fmt(c['precision']):>5} "
            f"{fmt(c['precision_single']):>6}  {fmt(c['recall']):>6} {fmt(c['recall_single']):>6} "
            f"{fmt(c['recall_cross']):>6}"
        )
    for name in ("core", "full"):
        c = summary[name]
        out.append(
            f"{name}: tricky-negative hits {c['tricky_hits']}, unlabelled findings {c['unlabelled']}, "
            f"positives single-file {c['positives_single']} / cross-file {c['positives_cross']}"
        )
    out += ["", f"Misses ({len(summary['misses'])}):"]
    out += [f"  {m['where']} {m['rule']} [{m['scope']}] {m['reason']}" for m in summary["misses"]]
    out += ["", f"False positives ({len(summary['false_positives'])}):"]
    out += [f"  {f['where']} {f['rule']} [{f['label']}] {f['reason']}" for f in summary["false_positives"]]
    if summary["stale"]:
        out += ["", "Stale labels (their line's text is no longer in the file):"]
        out += [f"  {s['where']} {s['rule']}" for s in summary["stale"]]
    return "\n".join(out)


# -- command line --------------------------------------------------------------------------------


def corpus_files(manifest: dict, root: Path) -> tuple[list[tuple[str, str]], list[Path]]:
    """The manifest's files present under `root` (as (repo, path)), and the paths of those missing."""
    present, missing = [], []
    for entry in manifest["files"]:
        path = root / repo_folder(entry["repo"]) / entry["path"]
        if path.is_file():
            present.append((entry["repo"], entry["path"]))
        else:
            missing.append(path)
    return present, missing


def fetch_commands(manifest: dict) -> str:
    """Shell commands that check every repository out at its commit, one folder each (needs git, network)."""
    lines = ["set -e", 'ROOT="${1:?corpus root}"', 'mkdir -p "$ROOT"']
    files_by_commit = defaultdict(list)
    for entry in manifest["files"]:
        commit = entry.get("commit") or manifest["repos"][entry["repo"]]["commit"]
        files_by_commit[(entry["repo"], commit)].append(entry["path"])
    for (repo, commit), paths in sorted(files_by_commit.items()):
        folder = f'"$ROOT/{repo_folder(repo)}"'
        lines.append(
            f"test -d {folder}/.git || git clone --filter=blob:none --no-checkout "
            f"https://github.com/{repo}.git {folder}"
        )
        lines.append(
            f"git -C {folder} fetch --quiet origin {commit} && "
            f"git -C {folder} checkout --quiet {commit} -- {' '.join(sorted(paths))}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, help="corpus root: one <owner>__<name>/ folder per repository")
    parser.add_argument("--labels", type=Path, default=CORPUS_DIR / "labels.jsonl")
    parser.add_argument("--manifest", type=Path, default=CORPUS_DIR / "manifest.json")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--jobs", type=int, help="gpulint's worker processes")
    parser.add_argument("--findings", type=Path, help="use gpulint JSON saved by --save-findings instead of running it")
    parser.add_argument("--save-findings", type=Path, help="also write gpulint's JSON output here")
    parser.add_argument(
        "--default-output", action="store_true", help="score only what a default run prints (no hints, no opt-in rules)"
    )
    parser.add_argument("--stamp", action="store_true", help="fill in labels' missing text_sha1 from the corpus")
    parser.add_argument("--fetch-commands", action="store_true", help="print shell commands that build the corpus")
    args = parser.parse_args(argv)

    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    if args.fetch_commands:
        print(fetch_commands(manifest))
        return 0
    if args.root is None:
        parser.error("the corpus root is required")
    root = args.root.resolve()
    keys, missing = corpus_files(manifest, root)
    for path in missing:
        print(f"missing from the corpus (skipped): {path}", file=sys.stderr)
    sources = {key: SourceFile(root / repo_folder(key[0]) / key[1]) for key in keys}
    labels = load_labels(args.labels)

    if args.stamp:
        for label in labels:
            if not label.text_sha1 and label.file_key in sources:
                label.text_sha1 = line_hash(sources[label.file_key].line_text(label.cell, label.line) or "")
        write_labels(args.labels, labels)
        return 0

    if args.findings:
        records = json.loads(args.findings.read_text(encoding="utf-8"))
    else:
        records = run_gpulint([root / repo_folder(repo) / path for repo, path in keys], args.jobs)
    if args.save_findings:
        args.save_findings.write_text(json.dumps(records), encoding="utf-8")
    if args.default_output:
        records = default_output(records)
    findings = findings_from_json(records, root, list(manifest["repos"]))
    labels = [label for label in labels if label.file_key in sources]
    summary = summarize(evaluate(labels, findings, sources), labels, len(keys))
    print(json.dumps(summary, indent=1) if args.json else render_text(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
