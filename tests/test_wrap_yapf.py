"""Fixed lines too long in a project yapf formats are wrapped as yapf wraps them, checked with yapf
itself: for each statement a fix made too long, yapf (its `pep8` style at 79 columns, `google` at
80, and `pep8` with `split_before_named_assigns = false`) leaves gpulint's wrapped lines as they
are.  Black's layout of the same statements is what yapf rewrites, and projects formatted by black
or ruff keep it (the command-line cases at the end).
"""

from __future__ import annotations

import sys
import textwrap

import libcst as cst
import pytest

from gpulint.linter.fix.wrap import wrap_header, wrap_statement
from gpulint.linter.project import BLACK, YAPF, YAPF_FILLED, layout_from
from tests.helpers import run_cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

yapf_api = pytest.importorskip("yapf.yapflib.yapf_api", reason="yapf is not installed (the dev extra)")
file_resources = pytest.importorskip("yapf.yapflib.file_resources")

STYLES = {
    # name: (yapf's style, its column limit, the layout gpulint gives a project in that style)
    "pep8": ("pep8", 79, YAPF),
    "google": ("google", 80, YAPF),
    "pep8-filled": ("{based_on_style: pep8, split_before_named_assigns: false}", 79, YAPF_FILLED),
}

# Statements as a fix leaves them (one line, too long), each in the function it sits in.
FIXED = {
    "argument added at the end": """\
        def load(train_set, args):
            loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, pin_memory=True)
        """,
    "argument added at the end, positional ones": """\
        def load(train_set, args):
            loader = make_loader(train_set, args.batch_size, args.workers, torch.device("cuda:0"))
        """,
    "nested calls, a method called on the result": """\
        def train(model, loader, device):
            for data, target in loader:
                F.nll_loss(model(batch.to(device, non_blocking=True)), target_labels).backward()
        """,
    "under indentation": """\
        def fit(self, loader):
            for epoch in range(self.epochs):
                for inputs, labels in loader:
                    if self.training:
                        with torch.autocast("cuda"):
                            outputs = self.model(inputs.to(self.device, non_blocking=True), labels)
        """,
    "a method chain": """\
        def pipeline(files, decode):
            ds = tf.data.Dataset.from_tensor_slices(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(32)
        """,
    "a comment after the line": """\
        def load(train_set):
            loader = DataLoader(train_set, batch_size=64, pin_memory=True)  # one worker: small set
        """,
    "a comment after a method chain": """\
        def move(tensor, device):
            x = some_function_name(tensor, argument_two).to(device, non_blocking=True)  # pinned
        """,
    "arguments yapf splits its own way: one a line with a trailing comma, which it keeps": (
        "def sample(self, world_size, rank):\n"
        "    loader = torch.utils.data.DataLoader(self, batch_size=200, collate_fn=lambda x: x,"
        " sampler=DistributedSampler(self, num_replicas=world_size, rank=rank, shuffle=True),"
        " persistent_workers=self.num_workers > 0)\n"
    ),
    "a sole argument, itself a call": """\
        def build(self, dim_model, i):
            if self.up:
                self.transformers_up.append(TransformerBlock(in_channels=dim_model[i], out_channels=dim_model[i]))
        """,
    "the arguments far to the right: yapf breaks after the bracket": """\
        def rag(self, ret, documents):
            for document in documents:
                if document.pending:
                    with self.lock:
                        if ret:
                            text_artifacts = get_text_artifacts(ret["segments"], self.client.to(device))
        """,
    "a call before the last one on the line splits": """\
        def cluster(kmeans_input):
            kmeans = KMeans(n_clusters=7, random_state=0, n_init="auto").fit(kmeans_input.to(device))
        """,
    "the call's name too long to align with": """\
        def wrap(model, device, local_rank):
            model = torch.nn.parallel.DistributedDataParallel(model.to(device), device_ids=[local_rank])
        """,
    "an argument too long for its own line": (
        "def step(self, loader):\n"
        "    for inputs, labels_with_a_long_name_and_mores in loader:\n"
        "        outputs = self.model(inputs.to(self.device, non_blocking=True),"
        " labels_with_a_long_name_and_mores.to(self.device, non_blocking=True))\n"
    ),
    "a loop's header": """\
        def train(loader, device):
            for batch in tqdm(loader.to(device, non_blocking=True), desc="training", total=len(loader)):
                pass
        """,
}


class _Wrapper(cst.CSTTransformer):
    """Wraps every statement and loop header of a module as the fixer wraps those a fix changed."""

    def __init__(self, line_length: int, layout: str) -> None:
        super().__init__()
        self.line_length, self.layout = line_length, layout
        self.depth = 0

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth += 1

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        self.depth -= 1
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return wrap_statement(updated_node, "    " * self.depth, "    ", self.line_length, layout=self.layout)

    def leave_For(self, original_node, updated_node):
        return wrap_header(updated_node, "    " * self.depth, "    ", self.line_length, layout=self.layout)


def wrapped(source: str, line_length: int, layout: str) -> str:
    return cst.parse_module(source).visit(_Wrapper(line_length, layout)).code


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("case", sorted(FIXED))
def test_yapf_leaves_the_yapf_layout_of_a_fixed_line_as_it_is(case, style):
    yapf_style, column_limit, layout = STYLES[style]
    source = textwrap.dedent(FIXED[case])
    ours = wrapped(source, column_limit, layout)
    assert ours != source  # (the line was too long: it is wrapped)
    assert all(len(line) <= column_limit for line in ours.splitlines())
    assert yapf_api.FormatCode(ours, style_config=yapf_style)[0] == ours
    # Black's layout, which a yapf project got before, is what yapf rewrites.
    black = wrapped(source, column_limit, BLACK)
    assert yapf_api.FormatCode(black, style_config=yapf_style)[0] != black


def test_the_keyword_arguments_of_a_split_list_go_one_a_line_unless_the_project_fills_them():
    source = textwrap.dedent(FIXED["argument added at the end"])
    assert wrapped(source, 79, YAPF) == textwrap.dedent("""\
        def load(train_set, args):
            loader = DataLoader(train_set,
                                batch_size=args.batch_size,
                                shuffle=True,
                                pin_memory=True)
        """)
    assert wrapped(source, 79, YAPF_FILLED) == textwrap.dedent("""\
        def load(train_set, args):
            loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                                pin_memory=True)
        """)


# -- the layout a project gets, from its configuration, through the command line ----------------

SCRIPT = """\
import torch

device = torch.device("cuda")


def train(model, loader):
    for data, target in loader:
        loss = torch.nn.functional.nll_loss(model(data.to(device)), target)
        loss.backward()
"""
YAPF_FIXED = """\
        loss = torch.nn.functional.nll_loss(
            model(data.to(device, non_blocking=True)), target)
"""
BLACK_FIXED = """\
        loss = torch.nn.functional.nll_loss(
            model(data.to(device, non_blocking=True)), target
        )
"""
PYG_HOOKS = "repos:\n  - repo: https://github.com/google/yapf\n    rev: v0.43.0\n    hooks:\n      - id: yapf\n"
RUFF_HOOKS = "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    hooks:\n      - id: ruff-format\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pyproject.toml": '[tool.yapf]\nbased_on_style = "pep8"\n'}, YAPF_FIXED),
        ({".style.yapf": "[style]\nbased_on_style = google\ncolumn_limit = 79\n"}, YAPF_FIXED),
        # (a ruff configuration for linting beside yapf's hook: yapf formats the project)
        ({"pyproject.toml": "[tool.ruff]\nline-length = 79\n", ".pre-commit-config.yaml": PYG_HOOKS}, YAPF_FIXED),
        ({"pyproject.toml": "[tool.black]\nline-length = 79\n"}, BLACK_FIXED),
        ({"pyproject.toml": "[tool.ruff]\nline-length = 79\n"}, BLACK_FIXED),
        # (yapf configured, but the hook that formats is ruff's)
        (
            {
                "pyproject.toml": "[tool.ruff]\nline-length = 79\n",
                "setup.cfg": "[yapf]\nbased_on_style = pep8\n",
                ".pre-commit-config.yaml": RUFF_HOOKS,
            },
            BLACK_FIXED,
        ),
    ],
)
def test_a_project_formatted_by_yapf_gets_its_layout_and_others_black_s(tmp_path, monkeypatch, capsys, files, expected):
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["check", "train.py", "--fix", "--no-cache"], capsys)
    assert "Fixed 1 problem" in out, err
    fixed = (tmp_path / "train.py").read_text()
    assert expected in fixed
    if expected == YAPF_FIXED:  # (and yapf, at the project's own settings, keeps it)
        project_style = file_resources.GetDefaultStyleForDir(str(tmp_path))
        assert yapf_api.FormatCode(fixed, style_config=project_style)[0] == fixed


@pytest.mark.parametrize(
    ("files", "layout"),
    [
        ({".style.yapf": "[style]\nbased_on_style = google\n"}, YAPF),
        # (OpenMMLab's spelling: yapf reads its settings' names in either case)
        ({"setup.cfg": "[yapf]\nBASED_ON_STYLE = pep8\nSPLIT_BEFORE_NAMED_ASSIGNS = False\n"}, YAPF_FILLED),
        ({"pyproject.toml": "[tool.yapf]\nsplit_before_named_assigns = false\n"}, YAPF_FILLED),
        ({".pre-commit-config.yaml": PYG_HOOKS}, YAPF),  # (yapf's default style, pep8)
        # (facebook's style puts `)` back at the start of its line, as black does)
        ({".style.yapf": "[style]\nbased_on_style = facebook\n"}, BLACK),
        ({".style.yapf": "[style]\nbased_on_style = pep8\n", ".pre-commit-config.yaml": RUFF_HOOKS}, BLACK),
        ({}, BLACK),
    ],
)
def test_the_layout_is_yapf_s_where_yapf_formats_the_project(tmp_path, files, layout):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    pyproject = tomllib.loads(files.get("pyproject.toml", ""))
    assert layout_from(pyproject, tmp_path) == layout
