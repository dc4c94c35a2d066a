"""What to tell someone whose rule id or name matches no rule: the ids or names they most likely
meant ("did you mean").

One helper for every place a rule is named: `--select`, `--ignore`, `--extend-select` and the
configuration's `select`, `extend-select`, `ignore` and `per-file-ignores` (all resolved by
config.expand_selectors), and `gpulint rule ID`.  It compares against the rules it is given, so
rules registered at run time are suggested like the built-in ones.  Standard library only: it runs
while a command line is checked, before libcst is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol


class NamedRule(Protocol):
    """What a suggestion needs of a rule (catalog.RuleInfo and the Rule classes both have it)."""

    @property
    def code(self) -> str: ...

    @property
    def name(self) -> str: ...


# A rule id is letters then digits.  Letters typed for the digits they look like (GL3O2, GL1l1) are
# read as those digits before anything fuzzier is tried.
_ID = re.compile(r"([A-Z]+)([0-9A-Z]*)")
_DIGIT_LOOKALIKES = str.maketrans({"O": "0", "I": "1", "L": "1"})
# How alike (difflib's ratio) a misspelling must be: for ids, one wrong or extra character of five
# (GL3022, GL312) is close, two (GL999 against GL900) is another id; names tolerate more.
_ID_CUTOFF = 0.8
_NAME_CUTOFF = 0.6


def prefix_matches(word: str, rules: Iterable[NamedRule]) -> list[str]:
    """The codes a prefix selector such as `GL20` stands for."""
    prefix = word.strip().upper()
    return [rule.code for rule in rules if prefix and rule.code.startswith(prefix)]


def closest(word: str, rules: Iterable[NamedRule], limit: int = 3) -> list[str]:
    """The rule ids (or id prefixes) or names `word` was most likely meant to be, best first; []
    when none is close.  A word with a digit in it is taken for an id, any other for a name."""
    rules = list(rules)
    word = word.strip()
    if any(character.isdigit() for character in word):
        return _closest_id(word.upper(), [rule.code for rule in rules], limit)
    names = [rule.name for rule in rules]
    spelled = word.lower().replace("_", "-").replace(" ", "-")
    if spelled in names:  # dataloader_serial, Dataloader-Serial
        return [spelled]
    import difflib  # (a misspelled selector only: every run imports this module)

    return difflib.get_close_matches(spelled, names, n=limit, cutoff=_NAME_CUTOFF)


def _closest_id(word: str, codes: Sequence[str], limit: int) -> list[str]:
    parts = _ID.fullmatch(word)
    if parts is not None:
        read = parts[1] + parts[2].translate(_DIGIT_LOOKALIKES)
        if read != word and any(code.startswith(read) for code in codes):
            return [read]
    import difflib

    return difflib.get_close_matches(word, codes, n=limit, cutoff=_ID_CUTOFF)


def did_you_mean(word: str, rules: Iterable[NamedRule]) -> str:
    """` (did you mean 'GL302'?)`, to end a message about `word`: the closest id or name (one, as
    ruff and git suggest); "" when nothing is close."""
    suggestions = closest(word, rules, limit=1)
    return f" (did you mean {suggestions[0]!r}?)" if suggestions else ""


def unknown_selector(selector: str, rules: Iterable[NamedRule]) -> str:
    """The message for a selector that matches no rule."""
    hint = did_you_mean(selector, rules) or " (see `gpulint rules`)"
    return f"unknown rule selector {selector!r}{hint}"


def not_one_rule(word: str, rules: Iterable[NamedRule]) -> str:
    """The message for `gpulint rule WORD` when WORD names no single rule: the rules a prefix such
    as `GL20` selects, or the closest ids or names."""
    rules = list(rules)
    matches = prefix_matches(word, rules) if word.strip().upper() != "ALL" else [rule.code for rule in rules]
    if len(matches) > 1:
        names = {rule.code: rule.name for rule in rules}
        shown = ", ".join(f"{code} ({names[code]})" for code in matches[:8])
        more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
        return (
            f"{word!r} selects {len(matches)} rules, not one: {shown}{more}; "
            f"explain one with `gpulint rule {matches[0]}`, or list them with `gpulint rules --select {word}`"
        )
    if matches:
        return f"no rule {word!r} (did you mean {matches[0]!r}?)"
    return f"no rule {word!r}{did_you_mean(word, rules) or ' (see `gpulint rules`)'}"
