"""File discovery: what gets linted and what is skipped."""

from __future__ import annotations

import os
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


def test_links_inside_a_tree_are_not_followed_and_named_paths_are_reported(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    touch(tree / "ok.py")
    touch(outside / "secret.py")
    (tree / "dangling.py").symlink_to(tree / "nowhere.py")
    (tree / "out.py").symlink_to(outside / "secret.py")
    (tree / "outdir").symlink_to(outside)
    (tree / "loop").symlink_to(tree)
    (tree / "self.py").symlink_to(tree / "self.py")
    os.mkfifo(tree / "fifo.py")
    named = [tree / "missing.py", tree / "dangling.py", tree / "self.py", tree / "fifo.py"]
    files, errors = discover([tree, *named])
    assert names(files, tree) == ["ok.py"]
    reasons = {Path(e.path).name: e.reason for e in errors}
    assert reasons == {
        "missing.py": "no such file or directory",
        "dangling.py": "broken symbolic link",
        "self.py": "symbolic link loop; skipped",
        "fifo.py": "a FIFO, not a regular file; skipped",
    }
    assert len(errors) == 4, "the FIFO found by the walk and the one named are one line"


def test_a_named_link_is_followed(tmp_path):
    touch(tmp_path / "real" / "a.py")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "b.py").symlink_to(tmp_path / "real" / "a.py")
    files, errors = discover([tmp_path / "link"])
    assert files == [tmp_path / "link" / "a.py"] and not errors
    files, errors = discover([tmp_path / "b.py"])
    assert files == [tmp_path / "b.py"] and not errors


def test_unreadable_folder_is_one_line_and_the_rest_is_linted(tmp_path, monkeypatch):
    touch(tmp_path / "ok.py")
    touch(tmp_path / "locked" / "hidden.py")
    real_scandir = os.scandir

    def scandir(path):  # as chmod 000 would, for a user other than root
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    files, errors = discover([tmp_path])
    assert names(files, tmp_path) == ["ok.py"]
    reasons = [(Path(e.path).name, e.reason) for e in errors]
    assert reasons == [("locked", "cannot read folder: Permission denied; skipped")]


def test_duplicates_removed_and_order_is_stable(tmp_path):
    a = touch(tmp_path / "b" / "a.py")
    touch(tmp_path / "a.py")
    files, _ = discover([tmp_path, a, tmp_path / "b"])
    assert names(files, tmp_path) == ["a.py", "b/a.py"]


def test_a_walk_through_a_linked_or_relative_folder_applies_gitignore_and_excludes(tmp_path, monkeypatch):
    # (the walk matches each path's real path against the patterns: the folder it starts from is
    # resolved once, and what is below it is reached without following a link)
    real = tmp_path / "real"
    touch(real / ".gitignore", "generated/\n")
    touch(real / "generated" / "a.py")
    touch(real / "pkg" / ".gitignore", "local.py\n")
    touch(real / "pkg" / "local.py")
    touch(real / "pkg" / "model.py")
    touch(real / "legacy" / "old.py")
    touch(real / "train.py")
    (tmp_path / "link").symlink_to(real)
    files, errors = discover([tmp_path / "link"], exclude=["legacy/"], root=real)
    assert not errors
    assert names(files, tmp_path / "link") == ["pkg/model.py", "train.py"]
    monkeypatch.chdir(real / "pkg")
    files, _ = discover([Path("..")], exclude=["legacy/"], root=real)
    assert sorted(p.as_posix() for p in files) == ["../pkg/model.py", "../train.py"]
