"""The module classes of benchmarks/held_by_module.py: a training script, a Keras `fit` script, a library
module, and whether a module's stepping loop consumes the object a finding reports."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
spec = importlib.util.spec_from_file_location("held_by_module", BENCHMARKS / "held_by_module.py")
held_by_module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = held_by_module
spec.loader.exec_module(held_by_module)

SCRIPT = """\
from torch.utils.data import DataLoader

train_loader = DataLoader(train_set, batch_size=8)
eval_loader = DataLoader(eval_set, batch_size=8)
probe_loader = DataLoader(eval_set, batch_size=8)


def train(loader):
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


for epoch in range(10):
    train(train_loader)
    for x, y in eval_loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
print(next(iter(probe_loader)))
"""

FLAX = """\
import jax

loader = DataLoader(dataset, batch_size=8)


def train_step(state, batch):
    return state.apply_gradients(grads=grads)


p_train_step = jax.pmap(train_step)
for epoch in range(3):
    for batch in loader:
        state = p_train_step(state, batch)
"""

FIT = """\
ds = tf.data.Dataset.from_tensor_slices(x).map(augment)
unused = tf.data.Dataset.from_tensor_slices(x).map(augment)
model.fit(ds, epochs=3)
"""

LIBRARY = """\
def build_loader(dataset):
    return DataLoader(dataset, batch_size=8)
"""


def module(tmp_path: Path, text: str, name: str = "m.py") -> held_by_module.Module:
    path = tmp_path / name
    path.write_text(text)
    return held_by_module.Module(held_by_module.corpus_recall.SourceFile(path))


def test_a_script_with_a_step_loop_consumes_what_its_loops_iterate_or_what_it_passes_to_them(tmp_path):
    script = module(tmp_path, SCRIPT)
    assert script.kind == "steps"
    assert script.consumes(None, 3)  # passed to train(), whose loop steps
    assert script.consumes(None, 4)  # iterated by a stepping loop of the module
    assert not script.consumes(None, 5)  # only one batch peeked
    assert script.consumes(None, 11)  # the finding sits in the stepping loop itself


def test_a_step_wrapped_by_jax_pmap_still_steps(tmp_path):
    flax = module(tmp_path, FLAX)
    assert flax.kind == "steps"
    assert flax.consumes(None, 3)


def test_a_fit_script_consumes_what_it_fits_on_and_a_library_module_consumes_nothing(tmp_path):
    fit = module(tmp_path, FIT)
    assert fit.kind == "fits"
    assert fit.consumes(None, 1)
    assert not fit.consumes(None, 2)
    library = module(tmp_path, LIBRARY, "lib.py")
    assert library.kind == "library"
    assert not library.consumes(None, 2)


def test_a_notebook_is_one_module_across_its_cells(tmp_path):
    cells = [
        {"cell_type": "code", "source": ["loader = DataLoader(ds)\n"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "for b in loader:\n", "    loss.backward()\n"]},
    ]
    notebook = module(tmp_path, json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}), "nb.ipynb")
    assert notebook.kind == "steps"
    assert notebook.consumes(1, 1)
