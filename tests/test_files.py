"""File discovery: what gets linted and what is skipped."""

from __future__ import annotations

from pathlib import Path

from gpulint.linter.run.files import discover


def touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(files, root):
    return sorted(p.relative_to(root).as_posix() for p in files)


def test_recurses_and_skips_vcs_venvs_build_and_gitignored(tmp_path):
    touch(tmp_path / "train.py")
    touch(tmp_path / "pkg" / "model.py")
    touch(tmp_path / "README.md")
    touch(tmp_path / ".git" / "hooks" / "x.py")
    touch(tmp_path / "env" / "pyvenv.cfg")
    touch(tmp_path / "env" / "lib" / "site.py")
    touch(tmp_path / "build" / "lib" / "copy.py")
    touch(tmp_path / "__pycache__" / "x.py")
    touch(tmp_path / ".gitignore", "generated/\n*_pb2.py\n!keep_pb2.py\n")
    touch(tmp_path / "generated" / "a.py")
    touch(tmp_path / "proto_pb2.py")
    touch(tmp_path / "keep_pb2.py")
    touch(tmp_path / "pkg" / ".gitignore", "local.py\n")
    touch(tmp_path / "pkg" / "local.py")
    touch(tmp_path / "local.py")  # the nested .gitignore applies below pkg/ only
    files, errors = discover([tmp_path])
    assert not errors
    assert names(files, tmp_path) == ["keep_pb2.py", "local.py", "pkg/model.py", "train.py"]


def test_explicit_file_is_always_linted_and_exclude_applies_to_discovery(tmp_path):
    touch(tmp_path / ".gitignore", "ignored.py\n")
    ignored = touch(tmp_path / "ignored.py")
    touch(tmp_path / "legacy" / "old.py")
    touch(tmp_path / "new.py")
    files, _ = discover([tmp_path], exclude=["legacy/"], root=tmp_path)
    assert names(files, tmp_path) == ["new.py"]
    files, _ = discover([ignored])
    assert files == [ignored]


def test_missing_paths_broken_links_and_loops_are_reported(tmp_path):
    touch(tmp_path / "ok.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "again").symlink_to(tmp_path)
    files, errors = discover([tmp_path, tmp_path / "missing.py"])
    assert names(files, tmp_path) == ["ok.py"]
    reasons = {Path(e.path).name: e.reason for e in errors}
    assert reasons["missing.py"] == "no such file or directory"
    assert reasons["dangling.py"] == "broken symbolic link"
    assert any("loop" in r for r in reasons.values())


def test_duplicates_removed_and_order_is_stable(tmp_path):
    a = touch(tmp_path / "b" / "a.py")
    touch(tmp_path / "a.py")
    files, _ = discover([tmp_path, a, tmp_path / "b"])
    assert names(files, tmp_path) == ["a.py", "b/a.py"]
