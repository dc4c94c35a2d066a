"""Regenerate the README's rules table, docs/rules/*.md, the rule catalog (gpulint/linter/catalog.py)
and the rules' explanations for reports (gpulint/linter/rule_help.py) from the rule classes.

    python scripts/gen_docs.py          # write
    python scripts/gen_docs.py --check  # exit 1 if anything is stale (the tests do this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpulint.rules import all_rules
from gpulint.rules.docs import catalog_source, readme_with_table, rule_help_source, rule_markdown

ROOT = Path(__file__).resolve().parent.parent


def expected_files() -> dict[Path, str]:
    files = {ROOT / "docs" / "rules" / f"{rule.code}.md": rule_markdown(rule) for rule in all_rules()}
    readme = ROOT / "README.md"
    files[readme] = readme_with_table(readme.read_text(encoding="utf-8"))
    catalog = ROOT / "gpulint" / "linter" / "catalog.py"
    files[catalog] = catalog_source(catalog.read_text(encoding="utf-8"))
    files[ROOT / "gpulint" / "linter" / "rule_help.py"] = rule_help_source()
    return files


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for path, content in expected_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != content:
            stale.append(path.relative_to(ROOT))
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
    known = {p for p in expected_files()}
    for page in (ROOT / "docs" / "rules").glob("*.md"):
        if page not in known:
            stale.append(page.relative_to(ROOT))
            if not check:
                page.unlink()
    if stale:
        print(("stale: " if check else "updated: ") + ", ".join(map(str, stale)))
        return 1 if check else 0
    print("docs are current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
