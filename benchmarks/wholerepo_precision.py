"""Precision of gpulint's default rules on whole repositories, as each repository's maintainer reads it.

    .venv/bin/python benchmarks/wholerepo_precision.py --fetch-commands > fetch-wholerepo.sh
    sh fetch-wholerepo.sh ~/gpulint-wholerepo                       # git, network: each repository at its commit
    .venv/bin/python benchmarks/wholerepo_precision.py --trees ~/gpulint-wholerepo           # table + what to read
    .venv/bin/python benchmarks/wholerepo_precision.py --trees ~/gpulint-wholerepo --json    # the same as JSON
    .venv/bin/python benchmarks/wholerepo_precision.py --trees ~/gpulint-wholerepo --stamp   # hash new labels' lines

The repositories are not in this project (other projects' code, other licences): `tests/wholerepo/`
holds the manifest (repositories, the commit each was read at, licences) and the labels (see
tests/wholerepo/README.md).  `--trees DIR` holds one folder per repository, `<owner>__<name>/`, the
whole tree at the manifest's commit.

gpulint runs on each tree in turn, as a user runs it (`gpulint check TREE --format json`, default
rules, no cache, one worker unless `--jobs`), from this checkout.  Each finding is joined to the
label of the same repository, file, notebook cell and rule on the same line or in the same statement;
several findings may share a label (two `.cuda()` copies on one line).  A label is a verdict:

- `tp`      the maintainer would want this reported here, and the message is right;
- `tp-low`  technically right, but minor or deliberate in context (a unit test, a loop of a few
            iterations, a one-off tensor, a demo that prints on purpose);
- `fp`      the claimed problem is not there.

Per rule, and overall: findings, labelled findings, wanted share (tp), right share (tp + tp-low) and
wrong share (fp), each over the labelled findings of the rule -- where a rule's findings were
sampled, the sample stands for the rule -- and where the findings sit (tests / examples / library).
The overall shares weight each rule's shares by its number of findings.  Findings no label matches
are listed to be read; labels no finding matches any more are listed too (a wrong finding gone is
progress; a wanted one gone is a loss).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_recall import Finding, SourceFile, line_hash, relocate, repo_folder  # noqa: E402 - the sibling harness

from gpulint.linter.analysis.context import is_test_path  # noqa: E402 - the project's own package

WHOLEREPO_DIR = REPO / "tests" / "wholerepo"
VERDICTS = ("tp", "tp-low", "fp")
PLACES = ("tests", "examples", "library")
# Folders (or a notebook) that hold examples and tutorials rather than the project's library code.
_EXAMPLE_PATH = re.compile(
    r"(^|/)(examples?|tutorials?|demos?|notebooks?|projects|docs?|site|recipes|scripts|benchmarks?)/|\.ipynb$"
)


def place_of(path: str) -> str:
    """Where a file sits in its repository: `tests`, `examples` or `library`."""
    if is_test_path(path):
        return "tests"
    if _EXAMPLE_PATH.search(path):
        return "examples"
    return "library"


@dataclass
class Label:
    repo: str
    commit: str
    path: str
    cell: int | None  # notebooks: 1-based index among all cells, as gpulint reports it
    line: int
    rule: str
    verdict: str
    reason: str
    text_sha1: str = ""

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
        if label.verdict not in VERDICTS:
            raise ValueError(f"{path}:{number}: verdict must be one of {VERDICTS}, not {label.verdict!r}")
        labels.append(label)
    return labels


def write_labels(path: Path, labels: list[Label]) -> None:
    lines = [json.dumps(asdict(label), ensure_ascii=False) for label in labels]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- running gpulint -----------------------------------------------------------------------------


def run_gpulint(tree: Path, jobs: int) -> list[dict]:
    """gpulint's JSON records for one whole tree: default rules, no cache, this checkout's gpulint."""
    command = [sys.executable, "-m", "gpulint", "check", str(tree.resolve()), "--format", "json", "--no-cache"]
    command += ["--exit-zero", "--jobs", str(jobs)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    completed = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=environment, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"gpulint exited {completed.returncode} on {tree}:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout)


def findings_from_json(records: list[dict], repo: str, tree: Path) -> list[Finding]:
    """One tree's gpulint JSON records -> findings with paths relative to the tree (a finding outside
    the tree keeps its absolute path: it is counted, and listed as unlabelled)."""
    root = tree.resolve()
    findings = []
    for record in records:
        resolved = Path(record["filename"]).resolve()
        path = (resolved.relative_to(root) if resolved.is_relative_to(root) else resolved).as_posix()
        findings.append(
            Finding(repo, path, record.get("cell"), record["location"]["row"], record["code"], record["message"])
        )
    return findings


# -- joining findings to labels ------------------------------------------------------------------


@dataclass
class Join:
    """Every finding with its label (or None), the labels no finding matches, the labels whose text is gone."""

    judged: list[tuple[Finding, Label | None]]
    unreported: list[Label]
    stale: list[Label]


def join(labels: list[Label], findings: list[Finding], sources: dict[tuple[str, str], SourceFile]) -> Join:
    """Move each label to its line's text in the current source (or call it stale), then give every finding
    the label of its file, cell and rule on its line or in its statement."""
    live, stale = [], []
    for label in labels:
        source = sources.get(label.file_key)
        line = relocate(label, source) if source is not None else None
        if line is None:
            stale.append(label)
            continue
        live.append(label if line == label.line else Label(**{**asdict(label), "line": line}))

    candidates: dict[tuple, list[Label]] = defaultdict(list)
    for label in live:
        candidates[(label.file_key, label.cell, label.rule)].append(label)
    judged, used = [], set()
    for finding in sorted(findings, key=lambda f: (f.repo, f.path, f.cell or 0, f.line, f.rule)):
        label = _match(finding, candidates.get((finding.file_key, finding.cell, finding.rule), []), sources)
        if label is not None:
            used.add(id(label))
        judged.append((finding, label))
    unreported = [label for label in live if id(label) not in used]
    return Join(judged, unreported, stale)


def _match(finding: Finding, candidates: list[Label], sources: dict) -> Label | None:
    for label in candidates:
        if label.line == finding.line:
            return label
    source = sources.get(finding.file_key)
    statement = source.statement(finding.cell, finding.line) if source else None
    if statement is None:
        return None
    for label in candidates:
        if source.statement(label.cell, label.line) == statement:
            return label
    return None


# -- figures -------------------------------------------------------------------------------------


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole else None


def _figures(pairs: list[tuple[Finding, Label | None]]) -> dict:
    """Counts and shares of one group of findings.  A rule's shares are over its labelled findings (a
    sample, when its findings were sampled, stands for all of them); a group of several rules weights
    each rule's shares by its number of findings in the group, leaving out rules with no label yet."""
    verdicts = Counter(label.verdict for _, label in pairs if label is not None)
    per_rule: dict[str, Counter] = defaultdict(Counter)
    for finding, label in pairs:
        per_rule[finding.rule]["findings"] += 1
        if label is not None:
            per_rule[finding.rule][label.verdict] += 1
    weighed = {rule: c for rule, c in per_rule.items() if sum(c[v] for v in VERDICTS)}
    weight = sum(c["findings"] for c in weighed.values())

    def share(names: tuple[str, ...]) -> float | None:
        parts = (c["findings"] * sum(c[n] for n in names) / sum(c[v] for v in VERDICTS) for c in weighed.values())
        return _share(sum(parts), weight)

    return {
        "findings": len(pairs),
        "labelled": sum(verdicts.values()),
        **{verdict: verdicts[verdict] for verdict in VERDICTS},
        "wanted": share(("tp",)),
        "right": share(("tp", "tp-low")),
        "wrong": share(("fp",)),
        "rules_without_labels": sorted(set(per_rule) - set(weighed)),
        "places": {place: sum(place_of(f.path) == place for f, _ in pairs) for place in PLACES},
    }


def summarize(result: Join) -> dict:
    by_rule: dict[str, list] = defaultdict(list)
    by_place: dict[str, list] = defaultdict(list)
    by_repo: dict[str, list] = defaultdict(list)
    for finding, label in result.judged:
        by_rule[finding.rule].append((finding, label))
        by_place[place_of(finding.path)].append((finding, label))
        by_repo[finding.repo].append((finding, label))
    return {
        "per_rule": {rule: _figures(pairs) for rule, pairs in sorted(by_rule.items())},
        "overall": _figures(result.judged),
        "per_place": {place: _figures(by_place[place]) for place in PLACES},
        "per_repo": {repo: _figures(pairs) for repo, pairs in sorted(by_repo.items())},
        "unlabelled": [
            {"where": f.where(), "rule": f.rule, "place": place_of(f.path), "message": f.message}
            for f, label in result.judged
            if label is None
        ],
        "unreported": [
            {"where": label.where(), "rule": label.rule, "verdict": label.verdict, "reason": label.reason}
            for label in result.unreported
        ],
        "stale": [{"where": label.where(), "rule": label.rule} for label in result.stale],
    }


def render_text(summary: dict) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    def row(name: str, f: dict) -> str:
        places = " ".join(f"{f['places'][place]:>5}" for place in PLACES)
        return (
            f"{name:<40} {f['findings']:>5} {f['labelled']:>5} {f['tp']:>4} {f['tp-low']:>6} {f['fp']:>4}  "
            f"{pct(f['wanted']):>6} {pct(f['right']):>6} {pct(f['wrong']):>6}  {places}"
        )

    header = (
        f"{'':<40} {'found':>5} {'read':>5} {'tp':>4} {'tp-low':>6} {'fp':>4}  "
        f"{'wanted':>6} {'right':>6} {'wrong':>6}  {'tests':>5} {'exmpl':>5} {'lib':>5}"
    )
    out = [
        "Shares: a rule's over its read (labelled) findings; a row of several rules weights each rule's",
        "shares by its findings in the row (rules with none read are left out of the shares).",
        "",
        header,
    ]
    out += [row(rule, f) for rule, f in summary["per_rule"].items()]
    out.append("-" * len(header))
    out.append(row("all", summary["overall"]))
    if summary["overall"]["rules_without_labels"]:
        out.append(f"no finding read yet for: {', '.join(summary['overall']['rules_without_labels'])}")
    out += ["", header.replace(" " * 40, f"{'where':<40}", 1)]
    out += [row(place, f) for place, f in summary["per_place"].items()]
    out += ["", header.replace(" " * 40, f"{'repository':<40}", 1)]
    out += [row(repo, f) for repo, f in summary["per_repo"].items()]
    out += ["", f"Unlabelled findings, to read ({len(summary['unlabelled'])}):"]
    out += [f"  {u['where']} {u['rule']} [{u['place']}] {u['message']}" for u in summary["unlabelled"]]
    out += ["", f"Labels no finding matches any more ({len(summary['unreported'])}):"]
    out += [f"  {u['where']} {u['rule']} [{u['verdict']}] {u['reason']}" for u in summary["unreported"]]
    if summary["stale"]:
        out += ["", "Stale labels (their line's text is no longer in the file):"]
        out += [f"  {s['where']} {s['rule']}" for s in summary["stale"]]
    return "\n".join(out)


# -- command line --------------------------------------------------------------------------------


def fetch_commands(manifest: dict) -> str:
    """Shell commands that check every repository out, whole, at its commit (needs git and the network)."""
    lines = ["set -e", 'TREES="${1:?folder for the trees}"', 'mkdir -p "$TREES"']
    for repo, entry in sorted(manifest["repos"].items()):
        folder = f'"$TREES/{repo_folder(repo)}"'
        lines.append(
            f"test -d {folder}/.git || git clone --quiet --filter=blob:none --no-checkout "
            f"https://github.com/{repo}.git {folder}"
        )
        lines.append(f"git -C {folder} checkout --quiet {entry['commit']}")
    return "\n".join(lines)


def _sources(tree: Path, repo: str, paths: set[str]) -> dict[tuple[str, str], SourceFile]:
    return {(repo, path): SourceFile(tree / path) for path in paths if (tree / path).is_file()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=Path, help="one <owner>__<name>/ folder per repository, at its commit")
    parser.add_argument("--labels", type=Path, default=WHOLEREPO_DIR / "labels.jsonl")
    parser.add_argument("--manifest", type=Path, default=WHOLEREPO_DIR / "manifest.json")
    parser.add_argument("--repos", help="comma-separated owner/name subset of the manifest")
    parser.add_argument("--jobs", type=int, default=1, help="gpulint's worker processes per tree (default 1)")
    parser.add_argument("--findings", type=Path, help="read gpulint JSON saved by --save-findings (one file per tree)")
    parser.add_argument("--save-findings", type=Path, help="also write gpulint's JSON per tree into this folder")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--stamp", action="store_true", help="fill in labels' missing text_sha1 from the trees")
    parser.add_argument("--fetch-commands", action="store_true", help="print shell commands that fetch the trees")
    args = parser.parse_args(argv)

    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    if args.fetch_commands:
        print(fetch_commands(manifest))
        return 0
    if args.trees is None:
        parser.error("--trees is required (see --fetch-commands for how to build it)")
    wanted = set(args.repos.split(",")) if args.repos else set(manifest["repos"])
    unknown = wanted - set(manifest["repos"])
    if unknown:
        parser.error(f"not in the manifest: {', '.join(sorted(unknown))}")
    labels = [label for label in load_labels(args.labels) if label.repo in wanted]

    findings: list[Finding] = []
    sources: dict[tuple[str, str], SourceFile] = {}
    for repo in sorted(wanted):
        tree = args.trees / repo_folder(repo)
        if not tree.is_dir():
            print(f"missing tree (skipped): {tree}", file=sys.stderr)
            labels = [label for label in labels if label.repo != repo]
            continue
        if args.stamp:
            sources.update(_sources(tree, repo, {label.path for label in labels if label.repo == repo}))
            continue
        saved = (args.findings or Path()) / f"{repo_folder(repo)}.json"
        records = json.loads(saved.read_text(encoding="utf-8")) if args.findings else run_gpulint(tree, args.jobs)
        if args.save_findings:
            args.save_findings.mkdir(parents=True, exist_ok=True)
            (args.save_findings / f"{repo_folder(repo)}.json").write_text(json.dumps(records), encoding="utf-8")
        repo_findings = findings_from_json(records, repo, tree)
        findings += repo_findings
        paths = {f.path for f in repo_findings} | {label.path for label in labels if label.repo == repo}
        sources.update(_sources(tree, repo, paths))

    if args.stamp:
        everything = load_labels(args.labels)
        for label in everything:
            if not label.text_sha1 and label.file_key in sources:
                label.text_sha1 = line_hash(sources[label.file_key].line_text(label.cell, label.line) or "")
        write_labels(args.labels, everything)
        return 0

    summary = summarize(join(labels, findings, sources))
    print(json.dumps(summary, indent=1) if args.json else render_text(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
