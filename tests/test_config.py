"""Configuration: [tool.gpulint] in pyproject.toml, selection semantics, clear errors."""

from __future__ import annotations

import pytest

from gpulint.linter.config import ConfigError, Settings, expand_selectors, find_config, load_settings
from gpulint.rules import all_rules


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
