"""Mergeability of gpulint's fixes on whole repositories, as each repository's maintainer reads the PR.

    .venv/bin/python benchmarks/fix_mergeability.py --trees ~/gpulint-wholerepo              # table + what to read
    .venv/bin/python benchmarks/fix_mergeability.py --trees ~/gpulint-wholerepo --show-hunks # with the hunks' text
    .venv/bin/python benchmarks/fix_mergeability.py --trees ~/gpulint-wholerepo --json       # the same as JSON
    .venv/bin/python benchmarks/fix_mergeability.py --trees ~/gpulint-wholerepo --checkout ../main  # another gpulint

The trees are the whole-repository precision set (tests/wholerepo/manifest.json; see
tests/wholerepo/README.md for how to build them).  On each tree in turn, gpulint (this checkout, or
`--checkout DIR`) runs twice, as a user runs it, default rules, no cache:

- `gpulint check TREE --diff --unsafe-fixes`: every fix, safe and unsafe, as one diff -- what a
  maintainer reads in the PR (notebooks per cell, as gpulint prints them); nothing is written;
- `gpulint check TREE --format json --unsafe-fixes`: which rule's fix edits which lines.

`--safe-only` leaves out `--unsafe-fixes` (what `--fix` and the pre-commit fix hook write unattended);
`--select ALL` applies every rule's fixes, opt-in rules included (`--fix --unsafe-fixes --select ALL`).

`--formatter-check` also asks the project's formatter whether the fixed files are still formatted:
the files the fixes change are copied, before and after the fixes, into a folder that mirrors the
tree with the project's configuration files (those of the tree's root and of each folder above a
changed file), and `ruff format --check` (when the project configures ruff), `black --check` (when
it configures black) and `yapf --diff` (when it configures yapf) run there, at the project's own
settings.  A file clean before and not after is a new complaint: the fixes wrote what the formatter
would not.  The formatters come from the `dev` extra (ruff from `bench` too); a missing one is said
and skipped.  Notebooks are not checked (the formatters read `.py` files).

The diff is split into hunks.  A hunk belongs to the rules whose fix edits touch the lines it
changes (two rules' fixes on one line make one hunk of both).  Its KIND is those rules and their
fix messages with digits written as N (`GL102: Pin host memory: `pin_memory=True``): the builder's
own description of the change, so that a kind is one shape of fix and its key stays the same when
lines move or an interval changes.  A hunk's key is repository, path, notebook cell and the sha1 of
its changed lines (the `-` and `+` lines, in order).

Labels (`tests/wholerepo/fix_labels.jsonl`, one JSON object per line) give a verdict per kind in a
repository, or per hunk (a hunk label wins over its kind's label):

- `mergeable`    the maintainer merges it as it is: it runs, keeps results, sits in the right place;
- `needs-edits`  the change is wanted but not as written (placement, style, an interval, a comment);
- `wrong`        it should not be merged: it breaks or changes behaviour, or fixes nothing.

The table gives, per kind, its hunks and how many are mergeable / need edits / are wrong / unread;
then the hunks no label covers (to read and label) and the labels no hunk matches any more.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_recall import HASH_CHARS, repo_folder  # noqa: E402 - the sibling harness

WHOLEREPO_DIR = REPO / "tests" / "wholerepo"
VERDICTS = ("mergeable", "needs-edits", "wrong")
_FILE_HEADER = re.compile(r"^\+\+\+ b/(?P<path>.*?)(?::cell (?P<cell>\d+))?$")
_HUNK_HEADER = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<count>\d+))? \+\d+(?:,\d+)? @@")


# -- hunks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hunk:
    repo: str
    path: str  # relative to the tree
    cell: int | None  # notebooks: 1-based index among all cells, as gpulint prints it
    old_start: int  # first line of the hunk in the original file (or cell)
    body: tuple[str, ...]  # the hunk's lines, each with its ' ' / '-' / '+' prefix
    rules: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()  # the fix messages of those rules, digits as N

    @property
    def sha1(self) -> str:
        changed = "\n".join(line for line in self.body if line[:1] in "-+")
        return hashlib.sha1(changed.encode("utf-8")).hexdigest()[:HASH_CHARS]

    @property
    def kind(self) -> str:
        if not self.rules:
            return "(no rule's edit touches these lines)"
        return f"{'+'.join(self.rules)}: {' | '.join(self.fixes)}"

    def changed_rows(self) -> tuple[int, int]:
        """The first and last original line the hunk removes; lines inserted with nothing removed
        count the original lines on both sides of them."""
        rows: list[int] = []
        row, removed = self.old_start, False  # removed: the current run of changes removes lines
        for line in self.body:
            if line.startswith("-"):
                rows.append(row)
                row, removed = row + 1, True
            elif line.startswith("+"):
                if not removed:
                    rows += [row - 1, row]
            else:
                row, removed = row + 1, False
        return min(rows), max(rows)

    def where(self) -> str:
        cell = f"#cell{self.cell}" if self.cell is not None else ""
        return f"{self.repo}/{self.path}{cell}:{self.old_start}"


def split_diff(text: str, repo: str) -> list[Hunk]:
    """The hunks of gpulint's `--diff` output, run in the tree (paths relative to it)."""
    hunks: list[Hunk] = []
    path, cell = "", None
    start, body = 0, []

    def close() -> None:
        if body:
            hunks.append(Hunk(repo, path, cell, start, tuple(body)))

    for line in text.splitlines():
        header = _FILE_HEADER.match(line)
        if header:
            close()
            body = []
            path = Path(header["path"]).as_posix()
            cell = int(header["cell"]) if header["cell"] else None
            continue
        hunk = _HUNK_HEADER.match(line)
        if hunk:
            close()
            start, body = int(hunk["start"]), []
            continue
        if line.startswith("--- a/") or not path:
            continue
        if line[:1] in (" ", "-", "+") or line == "":
            body.append(line if line else " ")
    close()
    return hunks


def _edit_rows(edit: dict) -> tuple[int, int]:
    """The original lines an edit replaces, first and last; an insertion before line N gives the
    lines on both sides of it (N - 1, N)."""
    first, end = edit["location"]["row"], edit["end_location"]["row"]
    return (first, end - 1) if end > first else (first - 1, first)


def attribute(hunks: list[Hunk], records: list[dict], tree: Path) -> list[Hunk]:
    """Each hunk with the rules whose fix edits touch its changed lines, and their fix messages."""
    root = tree.resolve()
    edits: dict[tuple[str, int | None], list[tuple[int, int, str, str]]] = defaultdict(list)
    for record in records:
        fix = record.get("fix")
        if not fix:
            continue
        resolved = (root / record["filename"]).resolve()
        path = (resolved.relative_to(root) if resolved.is_relative_to(root) else resolved).as_posix()
        message = re.sub(r"\d+", "N", fix["message"])
        spans = [_edit_rows(edit) for edit in fix["edits"]]
        if not spans:  # a notebook fix JSON cannot place (a line added above a cell's first line)
            spans = [(record["location"]["row"] - 1, record["end_location"]["row"])]
        for first, last in spans:
            edits[(path, record.get("cell"))].append((first, last, record["code"], message))
    attributed = []
    for hunk in hunks:
        low, high = hunk.changed_rows()
        touching = {
            (code, message)
            for first, last, code, message in edits[(hunk.path, hunk.cell)]
            if first <= high and last >= low
        }
        rules = tuple(sorted({code for code, _ in touching}))
        fixes = tuple(sorted({message for _, message in touching}))
        attributed.append(Hunk(hunk.repo, hunk.path, hunk.cell, hunk.old_start, hunk.body, rules, fixes))
    return attributed


# -- labels --------------------------------------------------------------------------------------


@dataclass
class FixLabel:
    repo: str
    verdict: str
    reason: str
    kind: str = ""  # a verdict for every hunk of this kind in the repository ...
    path: str = ""  # ... or for one hunk: path, cell and the sha1 of its changed lines
    cell: int | None = None
    hunk: str = ""

    def where(self) -> str:
        if self.hunk:
            cell = f"#cell{self.cell}" if self.cell is not None else ""
            return f"{self.repo}/{self.path}{cell} hunk {self.hunk}"
        return f"{self.repo} kind {self.kind!r}"


def load_labels(path: Path) -> list[FixLabel]:
    labels = []
    if not path.exists():
        return labels
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        label = FixLabel(**json.loads(raw))
        if label.verdict not in VERDICTS:
            raise ValueError(f"{path}:{number}: verdict must be one of {VERDICTS}, not {label.verdict!r}")
        if bool(label.kind) == bool(label.hunk):
            raise ValueError(f"{path}:{number}: a label names either a kind or a hunk (with its path)")
        labels.append(label)
    return labels


@dataclass
class Join:
    judged: list[tuple[Hunk, FixLabel | None]]
    unmatched: list[FixLabel]


def join(labels: list[FixLabel], hunks: list[Hunk]) -> Join:
    by_hunk = {(label.repo, label.path, label.cell, label.hunk): label for label in labels if label.hunk}
    by_kind = {(label.repo, label.kind): label for label in labels if label.kind}
    judged, used = [], set()
    for hunk in hunks:
        label = by_hunk.get((hunk.repo, hunk.path, hunk.cell, hunk.sha1)) or by_kind.get((hunk.repo, hunk.kind))
        if label is not None:
            used.add(id(label))
        judged.append((hunk, label))
    return Join(judged, [label for label in labels if id(label) not in used])


# -- figures -------------------------------------------------------------------------------------


def summarize(result: Join) -> dict:
    per_kind: dict[str, Counter] = defaultdict(Counter)
    repos: dict[str, set[str]] = defaultdict(set)
    for hunk, label in result.judged:
        per_kind[hunk.kind]["hunks"] += 1
        per_kind[hunk.kind][label.verdict if label else "unread"] += 1
        repos[hunk.kind].add(hunk.repo)
    totals = Counter()
    for counts in per_kind.values():
        totals.update(counts)
    read = sum(totals[v] for v in VERDICTS)
    kinds_read = [k for k, c in per_kind.items() if any(c[v] for v in VERDICTS)]
    return {
        "per_kind": {
            kind: {"repos": len(repos[kind]), **{k: counts[k] for k in ("hunks", *VERDICTS, "unread")}}
            for kind, counts in sorted(per_kind.items())
        },
        "overall": {
            **{k: totals[k] for k in ("hunks", *VERDICTS, "unread")},
            "kinds": len(per_kind),
            "kinds_with_wrong": sum(1 for c in per_kind.values() if c["wrong"]),
            "kinds_with_needs_edits": sum(1 for c in per_kind.values() if c["needs-edits"]),
            "kinds_read": len(kinds_read),
            "needs_edits_share": round(totals["needs-edits"] / read, 3) if read else None,
            "wrong_share": round(totals["wrong"] / read, 3) if read else None,
        },
        "per_repo": {
            repo: dict(Counter(label.verdict if label else "unread" for h, label in result.judged if h.repo == repo))
            for repo in sorted({h.repo for h, _ in result.judged})
        },
        "unlabelled": [
            {"where": h.where(), "hunk": h.sha1, "kind": h.kind, "body": list(h.body)}
            for h, label in result.judged
            if label is None
        ],
        "unmatched": [{"where": label.where(), "verdict": label.verdict} for label in result.unmatched],
        "labelled": [
            {"where": h.where(), "kind": h.kind, "verdict": label.verdict, "reason": label.reason, "body": list(h.body)}
            for h, label in result.judged
            if label is not None and label.verdict != "mergeable"
        ],
    }


def render_text(summary: dict, show_hunks: bool) -> str:
    out = [f"{'kind':<100} {'repos':>5} {'hunks':>5} {'merge':>5} {'edits':>5} {'wrong':>5} {'unread':>6}"]
    for kind, c in summary["per_kind"].items():
        name = kind if len(kind) <= 100 else kind[:97] + "..."
        out.append(
            f"{name:<100} {c['repos']:>5} {c['hunks']:>5} {c['mergeable']:>5} {c['needs-edits']:>5} "
            f"{c['wrong']:>5} {c['unread']:>6}"
        )
    o = summary["overall"]
    out.append("-" * len(out[0]))
    counts = f"{o['hunks']:>5} {o['mergeable']:>5} {o['needs-edits']:>5} {o['wrong']:>5} {o['unread']:>6}"
    out.append(f"{'all':<100} {'':>5} {counts}")
    out.append(
        f"kinds: {o['kinds']} ({o['kinds_read']} read); with a wrong hunk: {o['kinds_with_wrong']}; "
        f"with a hunk that needs edits: {o['kinds_with_needs_edits']}"
    )
    if o["needs_edits_share"] is not None:
        out.append(
            f"of the hunks read: {100 * o['needs_edits_share']:.0f}% need edits, {100 * o['wrong_share']:.0f}% wrong"
        )
    out += ["", "repository: hunks by verdict"]
    out += [f"  {repo}: {counts}" for repo, counts in summary["per_repo"].items()]
    if show_hunks and summary["labelled"]:
        out += ["", "Hunks labelled needs-edits or wrong:"]
        for h in summary["labelled"]:
            out.append(f"  {h['where']} [{h['verdict']}] {h['kind']} -- {h['reason']}")
            out += [f"      {line}" for line in h["body"]]
    out += ["", f"Unlabelled hunks, to read ({len(summary['unlabelled'])}):"]
    for h in summary["unlabelled"]:
        out.append(f"  {h['where']} hunk {h['hunk']} {h['kind']}")
        if show_hunks:
            out += [f"      {line}" for line in h["body"]]
    out += ["", f"Labels no hunk matches any more ({len(summary['unmatched'])}):"]
    out += [f"  {u['where']} [{u['verdict']}]" for u in summary["unmatched"]]
    return "\n".join(out)


# -- formatter check -----------------------------------------------------------------------------

# The files that configure the formatters (and say the line length gpulint reads: project.py).
FORMATTER_CONFIGS = (
    "pyproject.toml",
    "ruff.toml",
    ".ruff.toml",
    "setup.cfg",
    "tox.ini",
    ".flake8",
    ".style.yapf",
    ".pre-commit-config.yaml",
)
FORMATTER_COMMANDS = {
    "ruff": [sys.executable, "-m", "ruff", "format", "--check"],
    "black": [sys.executable, "-m", "black", "--check", "-q"],
    "yapf": [sys.executable, "-m", "yapf", "--diff"],  # (exits 1 when it would change the file)
}


def patched(original: str, hunks: list[Hunk]) -> str | None:
    """`original` with the hunks of its diff applied; None when a hunk's context does not match."""
    lines = original.splitlines(keepends=True)
    out: list[str] = []
    position = 0  # the next original line to copy (0-based)
    for hunk in sorted(hunks, key=lambda h: h.old_start):
        removes = any(line[:1] in (" ", "-") for line in hunk.body)
        start = hunk.old_start - 1 if removes else hunk.old_start  # (an insertion's range names the line above)
        if start < position:
            return None
        out += lines[position:start]
        position = start
        for line in hunk.body:
            if line[:1] == "+":
                out.append(line[1:] + "\n")
                continue
            if position >= len(lines) or lines[position].rstrip("\r\n") != line[1:]:
                return None
            if line[:1] == " ":
                out.append(lines[position])
            position += 1
    return "".join(out + lines[position:])


def configured_formatters(tree: Path) -> list[str]:
    """The formatters the tree's root configures: ruff (its own files, `[tool.ruff]`, a pre-commit
    `ruff-format` hook), black (`[tool.black]`, a `black` hook) and yapf (`.style.yapf`, `[yapf]` in
    setup.cfg, `[tool.yapf]`, a `yapf` hook)."""
    pyproject = _text(tree / "pyproject.toml")
    hooks = _text(tree / ".pre-commit-config.yaml")
    found = []
    if (
        (tree / "ruff.toml").is_file()
        or (tree / ".ruff.toml").is_file()
        or re.search(r"^\[tool\.ruff[\].]", pyproject, re.MULTILINE)
        or re.search(r"id:\s*ruff-format\b", hooks)
    ):
        found.append("ruff")
    if re.search(r"^\[tool\.black\]", pyproject, re.MULTILINE) or re.search(r"id:\s*black\b", hooks):
        found.append("black")
    if (
        (tree / ".style.yapf").is_file()
        or re.search(r"^\[yapf\]", _text(tree / "setup.cfg"), re.MULTILINE)
        or re.search(r"^\[tool\.yapf\]", pyproject, re.MULTILINE)
        or re.search(r"id:\s*yapf\b", hooks)
    ):
        found.append("yapf")
    return found


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _mirror(tree: Path, root: Path, texts: dict[str, str]) -> None:
    """`texts` (path relative to the tree -> text) written under `root`, with the configuration files
    of the tree's root and of every folder above each file."""
    (root / ".git").mkdir(parents=True)  # the formatters look for the project's root no higher
    folders = {Path(".")}
    for relative, text in texts.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        folders.update(Path(relative).parents)
    for folder in folders:
        for name in FORMATTER_CONFIGS:
            source = tree / folder / name
            if source.is_file() and not (root / folder / name).exists():
                shutil.copyfile(source, root / folder / name)


def _unformatted(command: list[str], root: Path, paths: list[str]) -> set[str]:
    """The paths (relative to `root`) the formatter's check would change, each checked on its own."""
    complaints = set()
    for relative in paths:
        completed = subprocess.run([*command, relative], cwd=root, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            complaints.add(relative)
    return complaints


def formatter_check(tree: Path, hunks: list[Hunk]) -> dict:
    """For each formatter the tree configures: the changed files it found formatted before the fixes
    and not after (`new`), and those it already complained about before (`before`)."""
    by_path: dict[str, list[Hunk]] = defaultdict(list)
    for hunk in hunks:
        if hunk.cell is None and hunk.path.endswith(".py"):
            by_path[hunk.path].append(hunk)
    originals, fixed, unpatched = {}, {}, []
    for relative, file_hunks in sorted(by_path.items()):
        original = _text(tree / relative)
        new = patched(original, file_hunks)
        if new is None:
            unpatched.append(relative)
            continue
        originals[relative], fixed[relative] = original, new
    result: dict = {"files": len(fixed), "unpatched": unpatched, "formatters": {}}
    for formatter in configured_formatters(tree):
        command = FORMATTER_COMMANDS[formatter]
        if subprocess.run([*command[:3], "--version"], capture_output=True, check=False).returncode != 0:
            result["formatters"][formatter] = {"missing": f"{formatter} is not installed (the dev extra)"}
            continue
        with tempfile.TemporaryDirectory(prefix="gpulint-format-") as scratch:
            before_root, after_root = Path(scratch) / "before", Path(scratch) / "after"
            _mirror(tree, before_root, originals)
            _mirror(tree, after_root, fixed)
            before = _unformatted(command, before_root, sorted(originals))
            after = _unformatted(command, after_root, sorted(fixed))
        result["formatters"][formatter] = {"before": sorted(before), "new": sorted(after - before)}
    return result


def render_formatter_checks(checks: dict[str, dict]) -> str:
    out = ["", "Formatter check of the fixed files (new: formatted before the fixes, not after):"]
    for repo, check in checks.items():
        if not check["formatters"]:
            out.append(f"  {repo}: {check['files']} files; no ruff, black or yapf configured")
        for formatter, found in check["formatters"].items():
            if "missing" in found:
                out.append(f"  {repo}: {formatter}: {found['missing']}")
                continue
            out.append(
                f"  {repo}: {formatter}: {check['files']} files, {len(found['before'])} unformatted before, "
                f"{len(found['new'])} new"
            )
            out += [f"      new: {path}" for path in found["new"]]
        out += [f"      diff did not apply: {path}" for path in check["unpatched"]]
    return "\n".join(out)


# -- running gpulint -----------------------------------------------------------------------------


def run_gpulint(checkout: Path, tree: Path, jobs: int, fixes: tuple[str, ...], *extra: str) -> str:
    """gpulint's output on a whole tree, run in the tree (paths relative to it) from `checkout`; `fixes`
    are the options that say which fixes a user applies (`--unsafe-fixes`, `--select ALL`)."""
    command = [sys.executable, "-m", "gpulint", "check", ".", *fixes, "--no-cache", "--exit-zero"]
    command += ["--jobs", str(jobs), *extra]
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    completed = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=environment, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"gpulint exited {completed.returncode} on {tree}:\n{completed.stderr[-2000:]}")
    return completed.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=Path, required=True, help="one <owner>__<name>/ folder per repository")
    parser.add_argument("--labels", type=Path, default=WHOLEREPO_DIR / "fix_labels.jsonl")
    parser.add_argument("--manifest", type=Path, default=WHOLEREPO_DIR / "manifest.json")
    parser.add_argument("--repos", help="comma-separated owner/name subset of the manifest")
    parser.add_argument("--jobs", type=int, default=1, help="gpulint's worker processes per tree (default 1)")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the gpulint checkout to run (default: this one)")
    parser.add_argument("--save-diffs", type=Path, help="also keep gpulint's diff and JSON per tree in this folder")
    parser.add_argument("--diffs", type=Path, help="read the diffs and JSON kept by --save-diffs (no gpulint run)")
    parser.add_argument(
        "--select", help="the rules whose fixes are applied, as gpulint's --select (default: the default rules)"
    )
    parser.add_argument(
        "--safe-only", action="store_true", help="only the safe fixes (what `--fix` writes), not `--unsafe-fixes`"
    )
    parser.add_argument(
        "--formatter-check",
        action="store_true",
        help="also run the project's ruff format / black / yapf check on the fixed files (new complaints)",
    )
    parser.add_argument("--show-hunks", action="store_true", help="print the text of unread and not-mergeable hunks")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)

    manifest = json.loads(args.manifest.read_text(encoding="utf-8"))
    wanted = set(args.repos.split(",")) if args.repos else set(manifest["repos"])
    unknown = wanted - set(manifest["repos"])
    if unknown:
        parser.error(f"not in the manifest: {', '.join(sorted(unknown))}")
    checkout = args.checkout.resolve()
    fixes = () if args.safe_only else ("--unsafe-fixes",)
    if args.select:
        fixes += ("--select", args.select)
    labels = [label for label in load_labels(args.labels) if label.repo in wanted]

    hunks: list[Hunk] = []
    formatter_checks: dict[str, dict] = {}
    for repo in sorted(wanted):
        tree = args.trees / repo_folder(repo)
        if not tree.is_dir():
            print(f"missing tree (skipped): {tree}", file=sys.stderr)
            labels = [label for label in labels if label.repo != repo]
            continue
        if args.diffs:
            diff = (args.diffs / f"{repo_folder(repo)}.diff").read_text(encoding="utf-8")
            records = json.loads((args.diffs / f"{repo_folder(repo)}.json").read_text(encoding="utf-8"))
        else:
            diff = run_gpulint(checkout, tree, args.jobs, fixes, "--diff")
            records = json.loads(run_gpulint(checkout, tree, args.jobs, fixes, "--format", "json"))
        if args.save_diffs:
            args.save_diffs.mkdir(parents=True, exist_ok=True)
            (args.save_diffs / f"{repo_folder(repo)}.diff").write_text(diff, encoding="utf-8")
            (args.save_diffs / f"{repo_folder(repo)}.json").write_text(json.dumps(records), encoding="utf-8")
        tree_hunks = attribute(split_diff(diff, repo), records, tree)
        hunks += tree_hunks
        if args.formatter_check:
            formatter_checks[repo] = formatter_check(tree, tree_hunks)

    summary = summarize(join(labels, hunks))
    if args.formatter_check:
        summary["formatter_check"] = formatter_checks
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(render_text(summary, args.show_hunks))
        if args.formatter_check:
            print(render_formatter_checks(formatter_checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
