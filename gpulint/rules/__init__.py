"""The rule catalog: every rule, one module per rule, in a folder per family.

    data_pipeline/   GL1xx  how batches get from storage to the GPU
    syncs/           GL2xx  the host waiting for the GPU inside the step
    per_step/        GL3xx  work that belongs every N steps but runs every step
    precision/       GL4xx  precision and compilation
    distributed/     GL6xx  how gradients and processes are shared between GPUs
    tensorflow/      GL7xx  tf.data pipelines, XLA, eager steps
    trainers/        GL8xx  trainers configured to starve the GPU
    meta/            GL000, GL9xx  the file not parsing, gpulint's own comments

Every `Rule` subclass with a `code` in a module under this package is registered (`all_rules`).
The engine never imports this package: the settings hand it the rules they select.
"""

from __future__ import annotations

import importlib
import inspect
from functools import lru_cache

from gpulint.linter.rule import Rule, RuleOption


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by code."""
    import pkgutil  # (here: a lint imports this package for the rules it runs, never this listing)

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.walk_packages(__path__, f"{__name__}."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Rule) and obj is not Rule and "code" in vars(obj):
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"two rules claim {obj.code}: {found[obj.code].__name__}, {obj.__name__}")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.code: rule for rule in all_rules()}


def find_rule(key: str) -> type[Rule] | None:
    """A rule by code (`GL101`) or name (`dataloader-serial`)."""
    for rule in all_rules():
        if key.upper() == rule.code or key == rule.name:
            return rule
    return None


@lru_cache(maxsize=1)
def rule_options() -> dict[str, RuleOption]:
    """Every option some rule reads, by its config key."""
    options: dict[str, RuleOption] = {}
    for rule in all_rules():
        for option in rule.options:
            if options.setdefault(option.key, option) is not option:
                raise RuntimeError(f"two options claim `{option.key}`: declare it once (gpulint/rules/options.py)")
    return options
