"""Cache entries are data: outcomes survive the round trip exactly, anything else is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpulint.linter.engine import FileResult
from gpulint.linter.findings import Applicability, Edit, Finding, FixInfo, Location
from gpulint.linter.run.cache import LAYOUT, ResultCache
from gpulint.linter.run.datajson import MAX_DEPTH, ShapeError, from_data, json_depth, load_json, to_data
from gpulint.linter.run.outcome import FileOutcome, RunOptions
from gpulint.linter.run.safe_files import WriteScope


def _outcome(path: str = "train.py") -> FileOutcome:
    fix = FixInfo(Applicability.UNSAFE, "add it", (Edit("x = 1\n", Location(3, 1), Location(4, 1)),))
    finding = Finding(
        code="GL101",
        name="dataloader-serial",
        message="m",
        path=path,
        location=Location(3, 5),
        end_location=Location(3, 9),
        fix=fix,
        statement_row=3,
        display_location="cell 2:3:5",
        extra={"cell": 2},
    )
    return FileOutcome(FileResult(path, [finding], True), diff="--- a\n+++ b\n", fixed=1, errors=[])


def test_outcomes_round_trip_through_json():
    outcome = _outcome()
    rebuilt = from_data(FileOutcome, json.loads(json.dumps(to_data(outcome))))
    assert rebuilt == outcome
    assert rebuilt.result.findings[0].fix.applicability is Applicability.UNSAFE


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(fixed=True),  # a bool is not an int
        lambda d: d.update(errors="x"),
        lambda d: d["result"].pop("parsed"),
        lambda d: d["result"].update(extra_field=1),
        lambda d: d["result"]["findings"][0].update(location={"row": "3", "column": 5}),
        lambda d: d["result"]["findings"][0]["fix"].update(applicability="maybe"),
        lambda d: d["result"]["findings"][0].update(extra={"cell": {"__reduce__": ["os.system"]}, "x": object()}),
        lambda d: d["result"].update(findings=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]),
    ],
)
def test_damaged_data_is_refused(damage):
    data = json.loads(json.dumps(to_data(_outcome())))
    damage(data)
    with pytest.raises(ShapeError):
        from_data(FileOutcome, data)


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[[{"', 0),
        ("{}", 1),
        ('[[], [[]], {"a": {"b": []}}]', 4),
        ('{"a": "]]]\\"[[[", "b": [["\\\\", ["x"]]]}', 4),  # brackets in strings, escaped quotes and backslashes
    ],
)
def test_json_depth_counts_the_brackets_outside_strings(text, depth):
    assert json_depth(text) == depth
    assert load_json(text) == json.loads(text)


def test_json_nested_deeper_than_the_bound_is_refused_without_recursing():
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        with pytest.raises(ShapeError, match=f"nested deeper than {MAX_DEPTH} levels"):
            load_json(text)
    # A crafted string is scanned in one pass (no backtracking): an unterminated one of escaped
    # quotes is refused by the parser, not measured for ever.
    with pytest.raises(ValueError):
        load_json('"' + '\\"' * 1_000_000)


def _cache(tmp_path: Path) -> ResultCache:
    return ResultCache.for_run(tmp_path / "cache", "settings", RunOptions())


def test_an_entry_about_another_file_is_a_miss(tmp_path):
    cache = _cache(tmp_path)
    key = cache.key(Path("train.py"), "train.py", "hash")
    cache.put(key, _outcome())
    assert cache.get(key, "train.py") == _outcome()
    assert cache.get(key, "other.py") is None
    forged = _cache(tmp_path)
    forged.put(key, _outcome("/etc/passwd"))
    assert forged.get(key, "train.py") is None


def test_an_entry_under_another_key_is_a_miss(tmp_path):
    cache = _cache(tmp_path)
    first, second = cache.key(Path("a.py"), "a.py", "1"), cache.key(Path("a.py"), "a.py", "2")
    cache.put(first, _outcome("a.py"))
    entry = tmp_path / "cache" / LAYOUT / first[:2] / first[2:40]
    target = tmp_path / "cache" / LAYOUT / second[:2] / second[2:40]
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(entry.read_bytes())  # copied to where another key's entry goes
    assert cache.get(second, "a.py") is None


def test_write_scope_is_not_part_of_the_key(tmp_path):
    plain = ResultCache.for_run(tmp_path, "s", RunOptions(fix=True))
    scoped = ResultCache.for_run(tmp_path, "s", RunOptions(fix=True, write_scope=WriteScope(("/x",), ())))
    assert plain.run_key == scoped.run_key
    assert plain.run_key != ResultCache.for_run(tmp_path, "s", RunOptions(fix=True, with_edits=True)).run_key


def test_unusable_cache_folders(tmp_path):
    cache = _cache(tmp_path)
    assert cache.unusable_reason() is None, "absent: created on first write"
    cache.put(cache.key(Path("a.py"), "a.py", "1"), _outcome("a.py"))
    assert cache.unusable_reason() is None
    (tmp_path / "cache" / LAYOUT / "zz").mkdir()
    assert "holds files gpulint did not write (v1/zz)" in cache.unusable_reason()
    os.rmdir(tmp_path / "cache" / LAYOUT / "zz")
    (tmp_path / "cache" / "README").write_text("")
    assert "holds files gpulint did not write (README)" in cache.unusable_reason()
    (tmp_path / "file").write_text("")
    assert "is not a folder" in ResultCache(tmp_path / "file", "k").unusable_reason()
    (tmp_path / "linked").symlink_to(tmp_path / "cache")
    assert "is a symbolic link" in ResultCache(tmp_path / "linked", "k").unusable_reason()


def test_eviction_never_counts_or_deletes_what_it_did_not_write(tmp_path):
    cache = _cache(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ("f" * 38)).write_bytes(b"x" * 1000)
    shard = tmp_path / "cache" / LAYOUT / "ab"
    shard.mkdir(parents=True)
    (shard / ("e" * 38)).symlink_to(outside / ("f" * 38))
    (shard / "foreign.bin").write_bytes(b"x" * 1000)
    own = shard / ("0" * 38)
    own.write_bytes(b"x" * 1000)
    small = ResultCache(tmp_path / "cache", cache.run_key, max_bytes=10)
    total, entries = small.size()
    assert (total, [p for _m, _s, p in entries]) == (1000, [own])
    assert small.evict() == 1
    assert not own.exists() and (shard / "foreign.bin").exists() and (outside / ("f" * 38)).exists()


def test_the_key_names_libcsts_installed_version_without_importing_the_metadata_machinery(tmp_path):
    # (importlib.metadata's import and its scan of every installed distribution cost every cached
    # run time)
    import subprocess
    import sys
    from importlib import metadata

    from gpulint.linter.run.cache import installed_version

    assert installed_version("libcst") == metadata.version("libcst")
    assert installed_version("no_such_package_here") == ""
    probe = (
        "import sys\nfrom gpulint.linter.run.cache import gpulint_fingerprint\ngpulint_fingerprint()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('importlib.metadata', 'libcst'))))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert run.stdout.strip() == "[]"
