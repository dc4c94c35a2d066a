"""The command-line options a module declares (analysis/command_line.py): the attribute each
lands in follows argparse's own rule, read once for every analysis that asks."""

import argparse

import libcst as cst

from gpulint.linter.analysis.command_line import declared_options
from gpulint.linter.analysis.walk import TreeIndex

SOURCE = """
parser.add_argument("-c", "--cpu", action="store_true")
parser.add_argument("--num-workers", "-j", default=4, type=int)
parser.add_argument("-b", default=32)
parser.add_argument("--arch", dest="model_name", default="resnet50")
parser.add_argument("epochs", nargs="?", default=1)
parser.add_argument(*names)
"""


def options():
    return declared_options(TreeIndex(cst.parse_module(SOURCE), frozenset({"Call"})))


def test_each_option_lands_where_argparse_puts_it():
    parser = argparse.ArgumentParser()
    exec(SOURCE.replace("parser.add_argument(*names)\n", ""), {"parser": parser})
    parsed = vars(parser.parse_args([]))
    found = options()
    assert [option.dest for option in found] == ["cpu", "num_workers", "b", "model_name", "epochs"]
    assert set(parsed) == {option.dest for option in found}  # (argparse agrees on every name)


def test_flags_defaults_and_actions_are_as_written():
    cpu, workers, batch, arch, epochs = options()
    assert cpu.flags == ("-c", "--cpu") and cpu.action == "store_true" and cpu.default is None
    assert workers.flags == ("--num-workers", "-j") and isinstance(workers.default, cst.Integer)
    assert isinstance(arch.default, cst.SimpleString) and arch.default.evaluated_value == "resnet50"
    assert epochs.flags == ("epochs",) and batch.action is None


def test_the_names_the_parsed_command_line_is_bound_to():
    from gpulint.linter.analysis.command_line import parsed_arguments

    source = (
        "args = parser.parse_args()\ndef main():\n    opt = get_parser().parse_args(argv)\nself.args = p.parse_args()\n"
    )
    index = TreeIndex(cst.parse_module(source), frozenset({"Assign"}))
    assert [name for _assign, name in parsed_arguments(index)] == ["args", "opt"]
