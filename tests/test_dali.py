"""Which outputs of a DALI PyTorch iterator are on the GPU (gpulint/linter/analysis/dali.py)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.linter.analysis.context import FileContext
from gpulint.linter.analysis.dali import iterator_outputs

HEADER = """
import nvidia.dali.ops as ops
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.pipeline import Pipeline
from nvidia.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator
"""


def outputs(source: str) -> dict[str, str | None] | None:
    code = textwrap.dedent(HEADER) + textwrap.dedent(source)
    ctx = FileContext(cst.parse_module(code), "t.py", {}, frozenset({"Call", "Assign", "FunctionDef", "ClassDef"}))
    loop = next(node for node in ctx.module.body if isinstance(node, cst.For))
    return iterator_outputs(ctx, loop.iter)


def test_a_pipeline_function_mixed_decoder_and_operators_of_its_output_are_on_the_gpu():
    found = outputs(
        """
        @pipeline_def
        def train_pipe(root):
            jpegs, labels = fn.readers.file(file_root=root)
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
            images = fn.crop_mirror_normalize(images, crop=(224, 224))
            return images, labels, labels.gpu()

        for data in enumerate(DALIGenericIterator(train_pipe(root="r"), ["images", "labels", "moved"])):
            pass
        """
    )
    assert found == {"images": "gpu", "labels": "cpu", "moved": "gpu"}


def test_a_pipeline_class_with_operators_made_in_init_and_the_default_output_map():
    found = outputs(
        """
        class Pipe(Pipeline):
            def __init__(self, root, cpu):
                super().__init__(64, 4, 0)
                self.input = ops.readers.File(file_root=root)
                self.decode = ops.decoders.Image(device="cpu")
                self.normalize = ops.CropMirrorNormalize(device="gpu")
            def define_graph(self):
                jpegs, labels = self.input()
                return self.normalize(self.decode(jpegs).gpu()), labels

        loader = DALIClassificationIterator([Pipe("r", False)])
        for data in loader:
            pass
        """
    )
    assert found == {"data": "gpu", "label": "cpu"}


@pytest.mark.parametrize(
    "pipeline, iterator",
    [
        # a device this module does not set; an operator of a helper's output
        (
            "jpegs, labels = fn.readers.file(file_root=r)\n    return fn.decoders.image(jpegs, device=dev), labels",
            'DALIGenericIterator(pipe(), ["data", "label"])',
        ),
        (
            "jpegs, labels = fn.readers.file(file_root=r)\n    return fn.resize(load(jpegs)), labels",
            'DALIGenericIterator(pipe(), ["data", "label"])',
        ),
    ],
    ids=["device-from-a-variable", "helper-output"],
)
def test_an_output_whose_device_the_module_does_not_show_is_not_known(pipeline, iterator):
    found = outputs(f"@pipeline_def\ndef pipe():\n    {pipeline}\n\nfor data in {iterator}:\n    pass\n")
    assert found == {"data": None, "label": "cpu"}


def test_an_output_map_that_is_not_literal_or_a_pipeline_of_another_module_says_nothing():
    assert outputs("for data in DALIGenericIterator(pipe, names):\n    pass\n") == {}
    assert outputs("for data in DALIGenericIterator(make_pipe(), ['x', 'y']):\n    pass\n") == {"x": None, "y": None}
    assert outputs("for data in loader:\n    pass\n") is None


def test_a_pipeline_that_reuses_one_name_many_times_is_read_in_one_pass():
    steps = "\n".join("    x = fn.op(x, x, x)" for _ in range(200))
    found = outputs(
        f"@pipeline_def\ndef pipe():\n    x, y = fn.readers.file(file_root='r')\n{steps}\n    return x, y\n"
        "for data in DALIGenericIterator(pipe(), ['x', 'y']):\n    pass\n"
    )
    assert found == {"x": "cpu", "y": "cpu"}  # an operator of host inputs runs on the host
