"""GL8xx: trainers configured to starve the GPU -- Hugging Face `TrainingArguments`, Lightning `Trainer`.

Only literal values are findings: an argument that comes from a command-line parser
(`HfArgumentParser`, `LightningCLI`, `args.logging_steps`) or from `**kwargs` is the user's choice
at run time, and a constructor the parser builds (`parse_args_into_dataclasses()`) is no call here.
"""
