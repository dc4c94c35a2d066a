"""First lines that many rule cases share (`header=` of Valid and Invalid in gpulint.linter.rule):
the imports and setup that make a case the kind of module its rule looks at.  A case's rows count
from the header's first line."""

# A PyTorch script that trains on CUDA (3 lines).
CUDA_SCRIPT = 'import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device("cuda")\n'
# The same, for the host-sync rules, which also look at timing (3 lines).
TIMED_CUDA_SCRIPT = 'import torch\nimport time\ndevice = torch.device("cuda")\n'
# A PyTorch script that logs: logging, wandb, a logger (4 lines).
LOGGING_SCRIPT = "import logging\nimport torch\nimport wandb\nlogger = logging.getLogger(__name__)\n"
TF_SCRIPT = "import tensorflow as tf\n"
HF_SCRIPT = "from transformers import TrainingArguments\n"
LIGHTNING_SCRIPT = "import lightning as L\n"
