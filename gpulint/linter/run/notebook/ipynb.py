"""Reading and writing `.ipynb` files.

The JSON is read with the standard library, so notebooks are linted without the `notebooks`
extra: the linter only needs `cells[].cell_type` and `source`, and a linter should not refuse a
notebook over a schema detail Jupyter itself tolerates.  Only the `source` of changed cells is
replaced; the file is written with the JSON layout it had (indent, key order, escaping, final
newline are detected by reproducing the original bytes exactly), so outputs, execution counts and
metadata stay byte-for-byte.  A layout that cannot be reproduced is reported instead of
reformatting the file.  When nbformat is installed, a fixed notebook is validated before it is
written (if the original validated), as a second guard.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from gpulint.linter.run.notebook.cells import Cell, NotebookError, make_cell


@dataclass
class Notebook:
    raw: dict
    cells: list[Cell]  # code cells only
    source_kinds: dict[int, type]  # cell number -> type of its `source` field (list or str)
    text: str  # the file as decoded text (for the layout check)
    bom: bool


def _source_text(cell: dict, number: int) -> tuple[str, type]:
    source = cell.get("source", "")
    if isinstance(source, str):
        return source, str
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source), list
    raise NotebookError(f"cell {number}: `source` is not text")


def _is_python(raw: dict) -> bool:
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section, {}).get(key) if isinstance(metadata.get(section), dict) else None
        if isinstance(value, str) and value:
            return value.lower() in ("python", "python3", "ipython")
    return True


def read_notebook(data: bytes) -> Notebook | None:
    """The notebook's code cells (None: not a Python notebook).  Raises NotebookError."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a valid notebook: not UTF-8 text (byte {exc.start})") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"not a valid notebook: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise NotebookError("not a valid notebook: JSON nested too deeply") from exc
    if not isinstance(raw, dict):
        raise NotebookError("not a valid notebook: the top level is not a JSON object")
    major = raw.get("nbformat")
    if isinstance(major, int) and major < 4:
        raise NotebookError(
            f"nbformat {major} notebooks are not supported; convert with `jupyter nbconvert --to notebook --nbformat 4`"
        )
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("not a valid notebook: no `cells` list")
    if not _is_python(raw):
        return None
    code_cells = []
    kinds: dict[int, type] = {}
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a valid notebook: cell {number} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source, kind = _source_text(cell, number)
        kinds[number] = kind
        code_cells.append(make_cell(number, source))
    return Notebook(raw, code_cells, kinds, text, bom)


def layout_writer(text: str) -> Callable[[object], str] | None:
    """A function that writes the notebook's JSON exactly as the original file is laid out, found
    by reproducing the original text; None when no tried layout reproduces it."""
    raw = json.loads(text)
    second = text.split("\n", 2)[1] if text.count("\n") >= 2 else None
    indents: list[int | str | None] = []
    if second is not None:
        leading = second[: len(second) - len(second.lstrip(" \t"))]
        indents.append("\t" * len(leading) if leading.startswith("\t") else len(leading))
    indents += [1, 2, 4, None]
    tried = set()
    for indent in indents:
        separator_options = [(",", ": ")] if indent is not None else [(", ", ": "), (",", ":")]
        for separators in separator_options:
            for ensure_ascii in (False, True):
                key = (indent, separators, ensure_ascii)
                if key in tried:
                    continue
                tried.add(key)
                dumped = json.dumps(raw, indent=indent, separators=separators, ensure_ascii=ensure_ascii)
                for newline in ("\n", "\r\n"):
                    body = dumped.replace("\n", newline) if newline != "\n" else dumped
                    for tail in ("", newline):
                        if body + tail == text:

                            def write(obj, *, _key=key, _newline=newline, _tail=tail) -> str:
                                out = json.dumps(obj, indent=_key[0], separators=_key[1], ensure_ascii=_key[2])
                                return (out.replace("\n", _newline) if _newline != "\n" else out) + _tail

                            return write
    return None


def new_source(old_kind: type, text: str) -> str | list[str]:
    """The `source` field in the form the cell had: one string, or lines as Jupyter writes them."""
    if old_kind is str:
        return text
    parts = re.split(r"(?<=\n)", text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def nbformat_valid(raw: dict) -> bool | None:
    """Whether nbformat accepts the notebook (None: nbformat is not installed)."""
    try:
        import nbformat  # noqa: PLC0415 - optional dependency, only for fixes
    except ImportError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.validate(copy.deepcopy(raw))
    except Exception:  # nbformat raises ValidationError and, for odd input, other errors
        return False
    return True
