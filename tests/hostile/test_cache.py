"""The result cache arrives with the repository (git stores symbolic links) or from a CI cache
another job wrote: it may delete only what it wrote, and what it reads can never run code."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

from tests.hostile.conftest import Sandbox

CACHE = ".gpulint_cache"


def _entries(sandbox: Sandbox) -> list[Path]:
    return sorted(p for p in (sandbox.project / CACHE / "v1").rglob("*") if p.is_file() and not p.name.startswith("."))


def test_shard_linked_out_of_the_cache_deletes_nothing(sandbox):
    sandbox.write("train.py")
    victims = sandbox.outside / "victims"
    with open(victims / "big.bin", "wb") as handle:  # 70 MiB (sparse): over the cache's 64 MiB cap
        handle.truncate(70 * 2**20)
    (sandbox.project / CACHE / "v1").mkdir(parents=True)
    (sandbox.project / CACHE / "v1" / "00").symlink_to(victims)
    result = sandbox.run(".")
    assert result.returncode == 1
    line = result.one_line("warning:")
    assert "holds files gpulint did not write (v1/00); not used; running without a cache" in line
    assert len(list(victims.iterdir())) == 4


def test_cache_dir_pointed_at_the_project_deletes_no_checkpoint(sandbox):
    sandbox.write("train.py")
    models = sandbox.project / "v1" / "models"
    models.mkdir(parents=True)
    for name in ("a.ckpt", "b.ckpt"):
        with open(models / name, "wb") as handle:
            handle.truncate(40 * 2**20)
    result = sandbox.run(".", "--cache-dir", ".")
    assert result.returncode == 1
    assert "holds files gpulint did not write" in result.one_line("warning:")
    assert sorted(p.name for p in models.iterdir()) == ["a.ckpt", "b.ckpt"]
    assert not (sandbox.project / ".gitignore").exists() and not (sandbox.project / "CACHEDIR.TAG").exists()


def test_cache_folder_that_is_a_link_is_refused(sandbox):
    sandbox.write("train.py")
    (sandbox.project / CACHE).symlink_to(sandbox.outside / "victims")
    result = sandbox.run(".")
    assert result.returncode == 1
    assert "is a symbolic link; not used" in result.one_line("warning:")


def test_marker_file_that_is_a_link_is_not_followed(sandbox):
    sandbox.write("train.py")
    (sandbox.project / CACHE / "v1").mkdir(parents=True)
    (sandbox.project / CACHE / ".gitignore").symlink_to(sandbox.outside / "train.py")
    result = sandbox.run(".")
    assert result.returncode == 1
    assert "holds files gpulint did not write (.gitignore)" in result.one_line("warning:")


def test_markers_are_written_when_the_layout_already_exists(sandbox):
    sandbox.write("train.py")
    (sandbox.project / CACHE / "v1").mkdir(parents=True)
    result = sandbox.run(".")
    assert result.returncode == 1 and not result.stderr
    assert (sandbox.project / CACHE / ".gitignore").read_text().splitlines()[-1] == "*"
    tag = (sandbox.project / CACHE / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_eviction_deletes_only_the_cache_s_own_entries(sandbox):
    sandbox.write("train.py")
    shard = sandbox.project / CACHE / "v1" / "ab"
    shard.mkdir(parents=True)
    old_entry = shard / ("0" * 38)
    with open(old_entry, "wb") as handle:  # an entry of our name pattern, over the cap on its own
        handle.truncate(70 * 2**20)
    os.utime(old_entry, (1_000_000, 1_000_000))
    notes = shard / "notes.txt"
    notes.write_text("not an entry\n")
    os.utime(notes, (500_000, 500_000))  # older than the entry: first to go if it were counted
    (shard / ("1" * 38)).symlink_to(sandbox.outside / "model.ckpt")
    result = sandbox.run(".")
    assert result.returncode == 1 and not result.stderr
    assert not old_entry.exists(), "the oldest entry went to bring the cache under its cap"
    assert notes.exists() and (shard / ("1" * 38)).is_symlink()


def _poisoned_pickle(marker: Path) -> bytes:
    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps(Exploit())
    return b"GLC1" + hashlib.sha256(payload).digest() + payload  # the layout of the old pickle entries


def test_pickle_planted_in_the_cache_is_never_loaded(sandbox):
    sandbox.write("train.py")
    first = sandbox.run(".")
    entries = _entries(sandbox)
    assert entries
    marker = sandbox.project / "pwned"
    for entry in entries:
        entry.write_bytes(_poisoned_pickle(marker))
    again = sandbox.run(".")
    assert not marker.exists()
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)


def test_entries_of_the_wrong_shape_are_misses(sandbox):
    sandbox.write("train.py")
    first = sandbox.run(".", "--format", "json")
    entries = _entries(sandbox)
    # Entries hold a file's outcome, a module's project-index summary or a run's solved index; each
    # is bent its own way.
    outcome_shapes = [
        lambda o: {**o, "result": {**o["result"], "findings": "not a list"}},
        lambda o: {**o, "fixed": True},
        lambda o: {**o, "result": {**o["result"], "findings": [{"code": 3}]}},
        lambda o: {**o, "result": {**o["result"], "path": "/etc/passwd"}},  # about another file
        lambda o: {**o, "unexpected": 1},
    ]
    summary_shapes = [
        lambda s: {**s, "functions": "not a mapping"},
        lambda s: {**s, "version": -1},
        lambda s: {**s, "functions": {"f": {"calls": [[1]], "clock": False, "returns": []}}},
        lambda s: {k: v for k, v in s.items() if k != "bindings"},
        lambda s: {**s, "reiterated": 5},
    ]
    index_shapes = [  # the solved project index of a run: its files' views, each file's row
        lambda i: {**i, "views": "not a mapping"},
        lambda i: {**i, "rows": "not a mapping"},
        lambda i: {**i, "views": {path: 3 for path in i["views"]} or {"x": 3}},
        lambda i: {**i, "rows": {path: [1.5, 0, 0, 0, "", ""] for path in i["rows"]}},
        lambda i: {**i, "unexpected": 1},
    ]
    parts = {"outcome": outcome_shapes, "summary": summary_shapes, "index": index_shapes}
    assert {next(part for part in parts if part in json.loads(e.read_text())) for e in entries} == set(parts)
    for index in range(len(outcome_shapes)):
        for entry in entries:
            document = json.loads(entry.read_text())
            part = next(part for part in parts if part in document)
            document[part] = parts[part][index](document[part])
            entry.write_text(json.dumps(document))
        again = sandbox.run(".", "--format", "json")
        assert (again.returncode, again.stdout, again.stderr) == (first.returncode, first.stdout, ""), index


def test_entry_that_is_a_fifo_or_oversized_is_a_miss(sandbox):
    sandbox.write("a.py")
    sandbox.write("b.py")
    first = sandbox.run(".")
    fifo, big = _entries(sandbox)[:2]
    fifo.unlink()
    os.mkfifo(fifo)
    with open(big, "r+b") as handle:
        handle.truncate(9 * 2**20)
    again = sandbox.run(".")
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
