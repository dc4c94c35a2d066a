"""Whether a held rule's findings in training entry scripts are wanted more often than the rest.

    gpulint check TREE --select <the held rules> --show-hints --format json --no-cache --exit-zero \
        > HELD/<owner>__<name>.json                                         # each tree
    .venv/bin/python benchmarks/wholerepo_precision.py --trees TREES --save-findings DEFAULT
    .venv/bin/python benchmarks/corpus_recall.py CORPUS_ROOT --save-findings corpus.json
    .venv/bin/python benchmarks/held_by_module.py --held HELD --trees TREES --default DEFAULT \
        --corpus-findings corpus.json --corpus-root CORPUS_ROOT

A rule held back by default (`Rule.hint_by_default`) prints its findings only as hints.  This script
takes the findings the hold alone keeps back (a rule's own hints -- no evidence, a short loop -- are
left out: nothing lifts them) and sorts them by the module they sit in:

- `steps`     the module has a training step loop or step function of its own (the STEP_LOOP code
              shape: a step-shaped call -- `loss.backward()`, `optimizer.step()`, `apply_gradients` --
              that may run more than once, or a `training_step` defined);
- `fits`      no step loop, but the module calls `.fit(` (Keras, a Lightning `Trainer`): a loop it
              starts runs the steps;
- `library`   neither: a helper, a dataset module, a class other code calls.

and, within the first two, whether the reported object is consumed there: a name the reported
statement binds is iterated by a loop of the module that takes steps, or passed to `.fit(` or to a
module function that holds such a loop (or the finding sits inside such a loop).  The whole-repository
findings are joined to tests/wholerepo/labels.jsonl with that harness's own matching, the corpus's to
tests/corpus/labels.jsonl with its own: the first say whether the class is mostly wanted (and, with
`--default`, what the default output's shares would become were a class shown), the second what
recall showing the class would give back to a default run.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_recall  # noqa: E402 - the sibling harness
import wholerepo_precision  # noqa: E402 - the sibling harness

from gpulint.linter.analysis.code_shapes import STEP_LOOP, code_shapes  # noqa: E402 - the project's own package
from gpulint.linter.analysis.vocabulary import STEP_METHODS  # noqa: E402
from gpulint.rules import all_rules  # noqa: E402

HOLD = "held back by default"  # how the engine's hint for a held rule begins
FIT_METHODS = frozenset({"fit", "fit_generator"})
CLASSES = ("steps", "fits", "library")


def _parse(text: str) -> ast.Module | None:
    # IPython magics and shell escapes are not Python: blanked as the harness blanks them.
    lines = [
        magic.group(1) + "pass" if (magic := corpus_recall._MAGIC.match(row)) else row for row in text.splitlines()
    ]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _called(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def _calls(node: ast.AST) -> Iterable[str]:
    return (name for call in ast.walk(node) if isinstance(call, ast.Call) and (name := _called(call)) is not None)


def _mentions(expr: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(node, ast.Name) and node.id in names) or (isinstance(node, ast.Attribute) and node.attr in names)
        for node in ast.walk(expr)
    )


def _spans(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


class Module:
    """One file (a notebook's code cells together): its class, and its loops that take steps."""

    def __init__(self, source: corpus_recall.SourceFile) -> None:
        self.source = source
        self.cells = {cell: tree for cell, text in source.cells.items() if (tree := _parse(text)) is not None}
        nodes = [node for tree in self.cells.values() for node in ast.walk(tree)]
        functions = [node for node in nodes if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        # A loop steps if it calls a step method, or a function of the module that does (a `train_step`).
        step_functions = {f.name for f in functions if STEP_METHODS.intersection(_calls(f))}
        # ... or a name bound to a wrapped one (`p_train_step = jax.pmap(train_step)`, `tf.function(step)`).
        step_functions |= {
            target.id
            for node in nodes
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _mentions(node.value, step_functions)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        stepping = STEP_METHODS | step_functions
        self.loops = [
            (cell, node)
            for cell, tree in self.cells.items()
            for node in ast.walk(tree)
            if isinstance(node, (ast.For, ast.While)) and stepping.intersection(_calls(node))
        ]
        # Functions that run such a loop: what is passed to them is consumed by it.
        self.runners = FIT_METHODS | {
            f.name for f in functions if any(_spans(f, loop.lineno) for _, loop in self.loops)
        }
        self.calls = [node for node in nodes if isinstance(node, ast.Call)]
        if any(STEP_LOOP in code_shapes(tree, frozenset({STEP_LOOP})) for tree in self.cells.values()):
            self.kind = "steps"
        elif any(_called(call) in FIT_METHODS for call in self.calls):
            self.kind = "fits"
        else:
            self.kind = "library"

    def consumes(self, cell: int | None, line: int) -> bool:
        """A loop of this module that takes steps reads what the statement on `line` binds, or runs it."""
        if self.kind == "library" or cell not in self.cells:
            return False
        if any(_spans(loop, line) for loop_cell, loop in self.loops if loop_cell == cell):
            return True
        names = _bound_names(self.cells[cell], line)
        if not names:
            return False
        if any(isinstance(loop, ast.For) and _mentions(loop.iter, names) for _, loop in self.loops):
            return True
        return any(
            _called(call) in self.runners
            and any(_mentions(arg, names) for arg in [*call.args, *(k.value for k in call.keywords)])
            for call in self.calls
        )


def _bound_names(tree: ast.Module, line: int) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and _spans(node, line):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for part in ast.walk(target):
                    if isinstance(part, ast.Name):
                        names.add(part.id)
                    elif isinstance(part, ast.Attribute):
                        names.add(part.attr)
    return names


# -- the two label sets ------------------------------------------------------------------------


Key = tuple[str, str, bool]  # rule, module class, consumed there


def _held(records: list[dict]) -> list[dict]:
    return [record for record in records if (record.get("hint") or "").startswith(HOLD)]


def _class_of(modules: dict, source: corpus_recall.SourceFile | None, cell: int | None, line: int) -> tuple[str, bool]:
    if source is None:
        return "library", False
    module = modules.get(source.path)
    if module is None:
        module = modules[source.path] = Module(source)
    return module.kind, module.consumes(cell, line)


def wholerepo(held: Path, trees: Path, labels_path: Path, manifest: dict) -> tuple[dict[Key, Counter], dict]:
    """Verdicts of the held findings by rule and class (None: unlabelled), and each finding's class."""
    labels = wholerepo_precision.load_labels(labels_path)
    table: dict[Key, Counter] = defaultdict(Counter)
    classes: dict = {}
    modules: dict = {}
    for repo in sorted(manifest["repos"]):
        saved = held / f"{corpus_recall.repo_folder(repo)}.json"
        if not saved.is_file():
            continue
        tree = trees / corpus_recall.repo_folder(repo)
        findings = wholerepo_precision.findings_from_json(
            _held(json.loads(saved.read_text(encoding="utf-8"))), repo, tree
        )
        repo_labels = [label for label in labels if label.repo == repo]
        paths = {f.path for f in findings} | {label.path for label in repo_labels}
        sources = wholerepo_precision._sources(tree, repo, paths)
        for finding, label in wholerepo_precision.join(repo_labels, findings, sources).judged:
            kind, consumed = _class_of(modules, sources.get(finding.file_key), finding.cell, finding.line)
            classes[(repo, finding.path, finding.cell, finding.line, finding.rule)] = (kind, consumed)
            table[(finding.rule, kind, consumed)][label.verdict if label else None] += 1
    return table, classes


def corpus(findings_path: Path, root: Path, labels_path: Path, manifest: dict) -> tuple[dict[Key, int], dict]:
    """The corpus's positives only a held rule's hint finds, by rule and class; and the default
    output's core recall as it is and with each class shown."""
    keys, _ = corpus_recall.corpus_files(manifest, root)
    sources = {key: corpus_recall.SourceFile(root / corpus_recall.repo_folder(key[0]) / key[1]) for key in keys}
    labels = [label for label in corpus_recall.load_labels(labels_path) if label.file_key in sources]
    records = json.loads(findings_path.read_text(encoding="utf-8"))
    repos = list(manifest["repos"])
    modules: dict = {}
    shown: dict[str, list[dict]] = {
        name: corpus_recall.default_output(records) for name in ("default", *CLASSES[:2], "consumed")
    }
    table: dict[Key, int] = Counter()
    for record in _held(records):
        (finding,) = corpus_recall.findings_from_json([record], root, repos)
        kind, consumed = _class_of(modules, sources.get(finding.file_key), finding.cell, finding.line)
        for name, lifted in (("steps", kind == "steps"), ("fits", kind != "library"), ("consumed", consumed)):
            if lifted:
                shown[name].append(record)
    held_findings = corpus_recall.findings_from_json(_held(records), root, repos)
    for finding, _ in corpus_recall.evaluate(labels, held_findings, sources).true_positives:
        kind, consumed = _class_of(modules, sources.get(finding.file_key), finding.cell, finding.line)
        table[(finding.rule, kind, consumed)] += 1
    core = {rule.code for rule in all_rules() if rule.default == "on"}
    positives = sum(label.kind == "positive" and label.rule in core for label in labels)
    recall = {}
    for name, subset in shown.items():
        outcome = corpus_recall.evaluate(labels, corpus_recall.findings_from_json(subset, root, repos), sources)
        recall[name] = (sum(label.rule in core for _, label in outcome.true_positives), positives)
    return table, recall


def shown_with(default: Path, held: Path, trees: Path, labels_path: Path, manifest: dict, classes: dict) -> dict:
    """The default output's overall figures on whole repositories, as it is and with each class shown."""
    labels = wholerepo_precision.load_labels(labels_path)
    lifted = {"steps": {"steps"}, "fits": {"steps", "fits"}}
    shown: dict[str, list] = defaultdict(list)
    sources: dict = {}
    for repo in sorted(manifest["repos"]):
        folder = corpus_recall.repo_folder(repo)
        if not (held / f"{folder}.json").is_file() or not (default / f"{folder}.json").is_file():
            labels = [label for label in labels if label.repo != repo]
            continue
        tree = trees / folder
        base = wholerepo_precision.findings_from_json(json.loads((default / f"{folder}.json").read_text()), repo, tree)
        extra = wholerepo_precision.findings_from_json(
            _held(json.loads((held / f"{folder}.json").read_text())), repo, tree
        )
        for name in ("default", "steps", "fits", "consumed"):
            shown[name] += base
            for finding in extra:
                kind, consumed = classes[(repo, finding.path, finding.cell, finding.line, finding.rule)]
                if kind in lifted.get(name, ()) or (name == "consumed" and consumed):
                    shown[name].append(finding)
        paths = {f.path for f in base + extra} | {label.path for label in labels if label.repo == repo}
        sources.update(wholerepo_precision._sources(tree, repo, paths))
    return {
        name: wholerepo_precision.summarize(wholerepo_precision.join(labels, findings, sources))["overall"]
        for name, findings in shown.items()
    }


def _row(counts: Counter) -> str:
    labelled = counts["tp"] + counts["tp-low"] + counts["fp"]
    wanted = f"{counts['tp'] / labelled:.0%}" if labelled else "-"
    return f"{counts['tp']:4} {counts['tp-low']:6} {counts['fp']:4} {counts[None]:5} {wanted:>7}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--held", type=Path, required=True, help="the held rules' JSON with hints shown, one file per tree"
    )
    parser.add_argument("--trees", type=Path, required=True, help="one <owner>__<name>/ folder per repository")
    parser.add_argument("--labels", type=Path, default=wholerepo_precision.WHOLEREPO_DIR / "labels.jsonl")
    parser.add_argument("--manifest", type=Path, default=wholerepo_precision.WHOLEREPO_DIR / "manifest.json")
    parser.add_argument("--default", type=Path, help="wholerepo_precision.py --save-findings output (default rules)")
    parser.add_argument(
        "--corpus-findings", type=Path, help="corpus_recall.py --save-findings output (all rules, hints)"
    )
    parser.add_argument("--corpus-root", type=Path, help="the corpus root those findings were taken in")
    args = parser.parse_args(argv)

    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    table, classes = wholerepo(args.held, args.trees, args.labels, manifest)
    print("whole repositories: findings the hold keeps back, by the module they sit in")
    print("rule   class    consumed   tp tp-low   fp unlab  wanted")
    totals: dict[tuple[str, bool], Counter] = defaultdict(Counter)
    for (rule, kind, consumed), counts in sorted(table.items()):
        totals[(kind, consumed)].update(counts)
        print(f"{rule:6} {kind:8} {str(consumed):8} {_row(counts)}")
    for (kind, consumed), counts in sorted(totals.items()):
        print(f"{'all':6} {kind:8} {str(consumed):8} {_row(counts)}")

    if args.default:
        print("\nwhole repositories, default output as it is and with a class shown")
        print("shown      findings labelled  wanted  wrong")
        for name, figures in shown_with(args.default, args.held, args.trees, args.labels, manifest, classes).items():
            wanted, wrong = figures["wanted"], figures["wrong"]
            print(f"{name:9} {figures['findings']:9} {figures['labelled']:8} {wanted:7.1%} {wrong:6.1%}")

    if args.corpus_findings and args.corpus_root:
        corpus_manifest = json.loads((corpus_recall.CORPUS_DIR / "manifest.json").read_text(encoding="utf-8"))
        positives, recall = corpus(
            args.corpus_findings, args.corpus_root.resolve(), corpus_recall.CORPUS_DIR / "labels.jsonl", corpus_manifest
        )
        print("\ncorpus: positives only a held rule's hint finds, by the module they sit in")
        for (rule, kind, consumed), count in sorted(positives.items()):
            print(f"{rule:6} {kind:8} {str(consumed):8} {count:4}")
        print("\ncorpus, default output: core recall as it is and with a class shown")
        for name, (found, total) in recall.items():
            print(f"{name:9} {found}/{total} = {found / total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
