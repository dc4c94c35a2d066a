"""Configuration: [tool.gpulint] in pyproject.toml, selection semantics, clear errors."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gpulint.linter.config import (
    TOML_MAX_NESTING,
    ConfigError,
    Settings,
    _nested_past,
    expand_selectors,
    find_config,
    load_settings,
)
from gpulint.rules import all_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def write(tmp_path, text: str):
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    return path


def test_defaults_are_the_on_rules_and_hints_are_opt_in():
    enabled = Settings().enabled_codes()
    for rule in all_rules():
        assert (rule.code in enabled) == (rule.default == "on")


def test_all_prefix_name_and_ignore():
    every = {r.code for r in all_rules()}
    assert set(expand_selectors(["ALL"])) == every
    assert set(expand_selectors(["GL1"])) == {c for c in every if c.startswith("GL1")}
    assert expand_selectors(["dataloader-serial"]) == ["GL101"]
    settings = Settings(select=["GL1"], ignore=["GL102"], extend_select=["GL201"])
    assert "GL102" not in settings.enabled_codes()
    assert "GL201" in settings.enabled_codes()
    assert not any(c.startswith("GL3") for c in settings.enabled_codes())


def test_unknown_selector_is_an_error():
    with pytest.raises(ConfigError, match="GL999"):
        Settings(select=["GL999"]).enabled_codes()


def test_load_from_pyproject(tmp_path):
    path = write(
        tmp_path,
        """
[tool.gpulint]
select = ["GL1", "GL3"]
ignore = ["GL102"]
per-file-ignores = { "scripts/*.py" = ["GL302"] }
exclude = ["legacy/"]
unsafe-fixes = true
num-workers = "4"
log-every = 50
""",
    )
    settings = load_settings(path)
    assert settings.select == ["GL1", "GL3"]
    assert settings.ignore == ["GL102"]
    assert settings.per_file_ignores == {"scripts/*.py": ["GL302"]}
    assert settings.exclude == ["legacy/"]
    assert settings.unsafe_fixes is True
    assert settings.options == {"num-workers": "4", "log-every": 50}
    assert settings.root == tmp_path


@pytest.mark.parametrize(
    "body, message",
    [
        ('selct = ["GL1"]', "unknown key"),
        ('select = ["GL99"]', "unknown rule selector"),
        ("select = 3", "must be a list"),
        ('unsafe-fixes = "yes"', "true or false"),
        ("log-every = 0", "positive integer"),
        ('log-every = "10"', "must be an integer, not a string"),
        ('num-workers = "min(8,"', "Python expression"),
        ("[broken", "invalid TOML"),
        ("max-syntax-nodes = 0", "`max-syntax-nodes` must be a positive whole number, not 0"),
        ('max-findings-per-file = "many"', "`max-findings-per-file` must be a positive whole number"),
    ],
)
def test_bad_configuration_is_a_clear_error(tmp_path, body, message):
    path = write(tmp_path, "[tool.gpulint]\n" + body + "\n")
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


@pytest.mark.parametrize(
    "body", ['select = ["GL1O1"]', 'ignore = ["GL99"]', 'per-file-ignores = {"a.py" = ["GL3O2"]}', "log-every = 0"]
)
def test_a_bad_rule_id_or_value_names_the_configuration_file(tmp_path, body):
    # (the same id on the command line is the command line's: no file to name)
    path = write(tmp_path, "[tool.gpulint]\n" + body + "\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_budgets_of_work_per_file_are_read_and_change_the_cache_key(tmp_path):
    settings = load_settings(write(tmp_path, "[tool.gpulint]\nmax-syntax-nodes = 800\nmax-findings-per-file = 20\n"))
    assert (settings.max_syntax_nodes, settings.max_findings_per_file) == (800, 20)
    assert settings.fingerprint() != Settings().fingerprint()


def test_find_config_walks_up_and_skips_pyprojects_without_our_table(tmp_path):
    write(tmp_path, "[tool.gpulint]\nignore = ['GL102']\n")
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert find_config(inner) == tmp_path / "pyproject.toml"


def test_fingerprint_changes_with_results_relevant_settings():
    assert Settings().fingerprint() == Settings().fingerprint()
    assert Settings().fingerprint() != Settings(ignore=["GL102"]).fingerprint()
    assert Settings().fingerprint() != Settings(options={"log-every": 5}).fingerprint()


# -- what a repository's configuration cannot do --------------------------------------------------


@pytest.mark.parametrize(
    ("key", "raised", "default"),
    [
        ("max-file-size", '"64MiB"', "2.0 MiB"),
        ("max-syntax-nodes", "100000000", "50,000"),
        ("max-findings-per-file", "100000", "1,000"),
    ],
)
def test_a_configuration_found_beside_the_code_cannot_raise_a_safety_limit(tmp_path, key, raised, default):
    path = write(tmp_path, f"[tool.gpulint]\n{key} = {raised}\n")
    attribute = key.replace("-", "_")
    found = load_settings(path)
    assert getattr(found, attribute) == getattr(Settings(), attribute)
    [note] = found.notes
    assert note.startswith(f"{path}: `{key}` = ") and f"above the default limit ({default})" in note
    assert "--config" in note and "\n" not in note
    named = load_settings(path, trusted=True)  # the user's own: as written
    assert getattr(named, attribute) > getattr(Settings(), attribute) and not named.notes


def test_a_configuration_found_beside_the_code_can_lower_the_safety_limits(tmp_path):
    lowered = 'max-file-size = "1KiB"\nmax-syntax-nodes = 300\nmax-findings-per-file = 5\n'
    path = write(tmp_path, "[tool.gpulint]\n" + lowered)
    settings = load_settings(path)
    assert (settings.max_file_size, settings.max_syntax_nodes, settings.max_findings_per_file) == (1024, 300, 5)
    assert not settings.notes


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('exclude = ["legacy\\\\"]', "`exclude` pattern 'legacy\\\\' cannot be read: it ends with a backslash"),
        ('extend-exclude = ["[z-a].py"]', "`extend-exclude` pattern '[z-a].py' cannot be read: a bracket range runs"),
        ('test-files = ["!"]', "`test-files` pattern '!' cannot be read: it names nothing"),
        ("exclude = [3]", "`exclude` must be a list of patterns"),
        ('local-rules = ["rules\\u0000.py"]', "`local-rules` holds a NUL character"),
        ('history = "runs\\u0000.db"', "`history` holds a NUL character"),
        ('exclude = ["a\\u0000"]', "`exclude` holds a NUL character"),
        ('per-file-ignores = { "a\\u0000.py" = ["GL102"] }', "`per-file-ignores` holds a NUL character"),
    ],
)
def test_a_pattern_or_path_that_cannot_be_used_is_a_clear_error(tmp_path, body, message):
    path = write(tmp_path, "[tool.gpulint]\n" + body + "\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    assert str(raised.value).startswith(f"{path}: ") and message in str(raised.value)


@pytest.mark.parametrize("opening", ["[", "{a = "])
def test_toml_nested_past_the_limit_is_refused_before_the_parser_recurses(tmp_path, opening):
    closing = "]" if opening == "[" else "}"
    deep = opening * 3000 + ("1" if opening != "[" else "") + closing * 3000
    path = write(tmp_path, f'[tool.gpulint]\nselect = ["GL1"]\n\n[tool.other]\nx = {deep}\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    assert str(raised.value) == (
        f"{path}:5:{5 + TOML_MAX_NESTING * len(opening)}: arrays or inline tables nested more than "
        f"{TOML_MAX_NESTING} deep; not read"
    )


@pytest.mark.parametrize("string", ['"""a""""', "'''a''''", '"a\\""', "'a\\'", "# a\n"])
def test_nesting_right_after_a_string_or_comment_is_measured(tmp_path, string):
    """A multi-line string may end in four or five quotes, a basic string's backslash escapes a
    quote, a literal string's does not: the measure ends each where the parser does."""
    deep = "[" * 3000 + "]" * 3000
    path = write(tmp_path, f'[tool.gpulint]\nselect = ["GL1"]\n\n[tool.other]\nx = [{string}, {deep}]\n')
    with pytest.raises(ConfigError, match=f"nested more than {TOML_MAX_NESTING} deep; not read"):
        load_settings(path)


def test_brackets_in_strings_and_comments_are_not_nesting(tmp_path):
    many = "[" * 300
    text = (
        "[tool.gpulint]\n"
        f'exclude = ["{many}", \'{many}\', """\n{many} \\""" ]]]\n""", \'\'\'{many}\'\'\'\'\']  # {many}\n'
        f"# {many}\n"
        "[tool.other]\n"
        f'x = "{many}\\"{many}"\n'
    )
    settings = load_settings(write(tmp_path, text))
    assert settings.exclude == [many, many, f'{many} """ ]]]\n', f"{many}''"]


def _nested(children):
    return st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)


def _toml(value) -> str:
    """`value` as a TOML value: arrays and inline tables, strings in every quoting TOML has."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str):
        if "\n" not in value and "'" not in value:
            return "'" + value + "'"
        return json.dumps(value)  # a basic string: its escapes are TOML's too
    return str(value)


def _depth(value) -> int:
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max((_depth(item) for item in items), default=0)
    return 0


@given(st.recursive(st.integers(0, 9) | st.text("[]{}\"'#\\ \n", max_size=6), _nested, max_leaves=40))
@hypothesis_settings(max_examples=300, deadline=None)
def test_the_nesting_measure_never_reads_less_than_the_parser_nests(value):
    """Whatever the strings hold, the measure on the text is at least the nesting of the value the
    parser builds (`[tool.x]` adds one: the header's brackets)."""
    text = "[tool.x]\nvalue = " + _toml(value) + "\n"
    deepest = next(depth for depth in range(1000) if _nested_past(text, depth) is None)
    assert deepest >= _depth(value)
    assert tomllib.loads(text)["tool"]["x"]["value"] == value
