"""GL8xx: Hugging Face TrainingArguments and Lightning Trainer configuration."""

from __future__ import annotations

import textwrap

from tests.helpers import assert_fix_ok, codes, lint, rows

HF = "from transformers import TrainingArguments\n"
PL = "import lightning as L\n"


def src(body: str, header: str) -> str:
    return header + textwrap.dedent(body).lstrip("\n")


# -- GL801 hf-trainer-args ---------------------------------------------------------------------


def test_gl801_each_problem_once():
    source = src(
        """
        args = TrainingArguments(
            "out",
            logging_steps=1,
            eval_strategy="steps",
            eval_steps=10,
            save_steps=2,
        )
        """,
        HF,
    )
    assert rows(source, "GL801") == [(2, "GL801"), (4, "GL801"), (6, "GL801"), (7, "GL801")]


def test_gl801_eval_steps_defaulting_to_logging_steps():
    source = src('a = TrainingArguments("out", dataloader_num_workers=4, logging_steps=1,\n    evaluation_strategy="steps")\n', HF)
    found = lint(source, "GL801")
    assert [(f.location.row, "evaluated every step" in f.message) for f in found] == [(2, False), (3, True)]


def test_gl801_negatives():
    source = src(
        """
        import argparse
        from transformers import HfArgumentParser, Seq2SeqTrainingArguments as S2S
        parser = argparse.ArgumentParser()
        args = parser.parse_args()
        ok = TrainingArguments("out", dataloader_num_workers=4, logging_steps=50, eval_strategy="steps", eval_steps=500)
        from_cli = TrainingArguments("out", dataloader_num_workers=args.workers, logging_steps=args.logging_steps)
        no_eval = TrainingArguments("out", dataloader_num_workers=2, eval_steps=1)  # eval_strategy "no": unused
        epoch_logs = TrainingArguments("out", dataloader_num_workers=2, logging_steps=1, logging_strategy="epoch")
        epoch_saves = TrainingArguments("out", dataloader_num_workers=2, save_steps=1, save_strategy="epoch")
        splat = TrainingArguments(**config)
        (parsed,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
        s2s = S2S("out", dataloader_num_workers=8)
        # TrainingArguments("out", logging_steps=1) in a comment
        text = "TrainingArguments(logging_steps=1)"
        """,
        HF,
    )
    assert codes(source, "GL801") == []


def test_gl801_aliases_and_seq2seq():
    source = "import transformers as tr\nfrom transformers import Seq2SeqTrainingArguments as S\na = tr.TrainingArguments('o', dataloader_num_workers=0)\nb = S('o', dataloader_num_workers=2, logging_steps=1)\n"
    assert rows(source, "GL801") == [(3, "GL801"), (4, "GL801")]


def test_gl801_fix():
    source = src(
        """
        # configure
        args = TrainingArguments(
            "out",
            logging_steps=1,  # chatty
            eval_strategy="steps",
            eval_steps=1,
            bf16=True,
        )
        x = 1  # untouched
        """,
        HF,
    )
    fixed = assert_fix_ok(source, "GL801")
    assert "logging_steps" not in fixed and "eval_steps" not in fixed
    assert "dataloader_num_workers=min(8, os.cpu_count() or 1)" in fixed and "import os" in fixed
    assert "# configure" in fixed and "x = 1  # untouched" in fixed
    assert codes(fixed, "GL801") == []


# -- GL802 lightning-trainer -------------------------------------------------------------------


def test_gl802_positives():
    source = src(
        """
        trainer = L.Trainer(
            max_epochs=3,
            log_every_n_steps=1,
            val_check_interval=5,
        )
        """,
        PL,
    )
    assert rows(source, "GL802") == [(4, "GL802"), (5, "GL802")]


def test_gl802_both_package_names():
    assert codes("from pytorch_lightning import Trainer\nt = Trainer(log_every_n_steps=1)\n", "GL802") == ["GL802"]
    assert codes("import lightning.pytorch as pl\nt = pl.Trainer(val_check_interval=1)\n", "GL802") == ["GL802"]


def test_gl802_negatives():
    source = src(
        """
        from lightning.pytorch.cli import LightningCLI
        from transformers import Trainer as HfTrainer
        a = L.Trainer(log_every_n_steps=50, val_check_interval=0.25)
        b = L.Trainer(val_check_interval=1000)
        c = L.Trainer(log_every_n_steps=args.log_every)
        d = L.Trainer(**vars(args))
        e = HfTrainer(model=m, args=targs)
        cli = LightningCLI(Model)
        # L.Trainer(log_every_n_steps=1)
        """,
        PL,
    )
    assert codes(source, "GL802") == []


def test_gl802_fix_removes_keywords():
    source = src("t = L.Trainer(max_epochs=3, log_every_n_steps=1, val_check_interval=2)  # keep\n", PL)
    fixed = assert_fix_ok(source, "GL802")
    assert "t = L.Trainer(max_epochs=3)  # keep" in fixed


# -- GL803 trainer-precision -------------------------------------------------------------------


def test_gl803_positives():
    source = HF + PL + textwrap.dedent(
        """\
        a = TrainingArguments("out")
        b = TrainingArguments("out", fp16=False)
        c = L.Trainer(max_epochs=1)
        d = L.Trainer(precision="32-true")
        e = L.Trainer(precision=32)
        """
    )
    assert [r for r, _ in rows(source, "GL803")] == [3, 4, 5, 6, 7]


def test_gl803_negatives():
    source = HF + PL + textwrap.dedent(
        """\
        a = TrainingArguments("out", bf16=True)
        b = TrainingArguments("out", fp16=True)
        c = TrainingArguments("out", bf16=args.bf16)
        d = TrainingArguments("out", use_cpu=True)
        e = L.Trainer(precision="bf16-mixed")
        f = L.Trainer(precision="16-mixed")
        g = L.Trainer(precision=args.precision)
        h = L.Trainer(accelerator="cpu")
        i = L.Trainer(plugins=[plugin])
        j = L.Trainer(**kwargs)
        """
    )
    assert codes(source, "GL803") == []


def test_gl803_is_a_hint_and_fixes():
    from gpulint.linter.config import Settings
    from gpulint.linter.engine import Linter

    source = HF + PL + 'a = TrainingArguments("out", dataloader_num_workers=2)\nb = L.Trainer(max_epochs=1)\n'
    assert codes(source, "GL803") == ["GL803", "GL803"]
    assert not Linter(Settings()).lint_source(source.encode(), "x.py").findings
    fixed = assert_fix_ok(source, "GL803")
    assert 'TrainingArguments("out", dataloader_num_workers=2, bf16=True)' in fixed
    assert 'L.Trainer(max_epochs=1, precision="bf16-mixed")' in fixed
