"""Distributed launchers: `torchrun`, `python -m torch.distributed.run` and `accelerate launch`.

A launcher command is split into the launcher's own part and the training target, so the bootstrap
can go between them: `torchrun --nproc-per-node 2 train.py --lr 3` runs as
`torchrun --nproc-per-node 2 <bootstrap.py> train.py --lr 3`, and every rank the launcher starts is
instrumented.  Launcher options are read without importing the launcher (the parent stays light and
the launcher may live in another environment): an option takes a value unless it is one of the
launcher's flags below (tests keep the torchrun list in step with torch's own parser).
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

# torch.distributed.run options that take no value (spelled with - or _).
TORCHRUN_FLAGS = {"standalone", "module", "m", "no_python", "run_path", "virtual_local_rank"}
# accelerate launch options that take no value (spelled with - or _; accelerate accepts both).
ACCELERATE_FLAGS = {
    "quiet",
    "q",
    "cpu",
    "multi_gpu",
    "tpu",
    "ipex",
    "enable_cpu_affinity",
    "dynamo_use_fullgraph",
    "dynamo_use_dynamic",
    "dynamo_use_regional_compilation",
    "use_deepspeed",
    "use_fsdp",
    "use_megatron_lm",
    "use_xpu",
    "same_network",
    "module",
    "m",
    "no_python",
    "tpu_cluster",
    "no_tpu_cluster",
    "tpu_use_sudo",
    "downcast_bf16",
    "fp8_use_autocast_during_eval",
    "debug",
    "use_parallelism_config",
}
NPROC_OPTIONS = {"torchrun": "nproc_per_node", "accelerate launch": "num_processes"}
UNSUPPORTED = {"no_python": "runs a non-Python program", "run_path": "runs the script inside the launcher process"}


class LaunchError(Exception):
    """A launcher command that cannot be profiled: one line for the user."""


@dataclass
class Launch:
    name: str  # "torchrun" or "accelerate launch"
    prefix: list[str]  # the launcher's argv up to where the training script goes
    nproc: int | None  # processes per node when given as a number


def _option_name(token: str) -> str:
    return token.lstrip("-").split("=", 1)[0].replace("-", "_")


def _torchrun_prefix(argv: list[str]) -> tuple[list[str], int] | None:
    """(launcher argv before its options, index of the first option) for the torchrun forms."""
    first = Path(argv[0]).name
    if first == "torchrun":
        found = shutil.which(argv[0])
        if found is None:
            raise LaunchError(f"launcher {argv[0]!r} not found")
        return [found], 1
    if re.fullmatch(r"python[0-9.]*", first):
        rest = argv[1:]
        position = 1
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest, position = rest[1:], position + 1
        if len(rest) >= 2 and rest[0] == "-m":
            if rest[1] == "torch.distributed.run":
                interpreter = shutil.which(argv[0])
                if interpreter is None:
                    raise LaunchError(f"interpreter {argv[0]!r} not found")
                return [interpreter, *argv[1:position], "-m", "torch.distributed.run"], position + 2
            if rest[1] == "torch.distributed.launch":
                raise LaunchError(
                    "torch.distributed.launch is deprecated and passes --local-rank before the script: "
                    "use `torchrun` (or `python -m torch.distributed.run`)"
                )
    return None


def parse_launch(argv: list[str]) -> tuple[Launch, list[str]] | None:
    """(launch, target) for a launcher command, target being [script, args...] or ["-m", module,
    args...] as the bootstrap takes it; None when argv is not a launcher command."""
    if not argv:
        return None
    torchrun = _torchrun_prefix(argv)
    if torchrun is not None:
        name, flags = "torchrun", TORCHRUN_FLAGS
        prefix, index = torchrun
    elif Path(argv[0]).name == "accelerate" and len(argv) > 1 and argv[1] == "launch":
        found = shutil.which(argv[0])
        if found is None:
            raise LaunchError(f"launcher {argv[0]!r} not found")
        name, flags = "accelerate launch", ACCELERATE_FLAGS
        prefix, index = [found, "launch"], 2
    else:
        return None
    options: list[str] = []
    module = False
    nproc = None
    tokens = argv[index:]
    position = 0
    while position < len(tokens) and tokens[position].startswith("-"):
        token = tokens[position]
        option = _option_name(token)
        if option in UNSUPPORTED:
            raise LaunchError(f"cannot profile `{name} {token}`: it {UNSUPPORTED[option]}")
        if option in ("module", "m"):
            module = True
            position += 1
            continue
        if option in flags or "=" in token:
            value = token.split("=", 1)[1] if "=" in token else None
            options.append(token)
            position += 1
        else:
            value = tokens[position + 1] if position + 1 < len(tokens) else None
            options += tokens[position : position + 2]
            position += 2
        if option == NPROC_OPTIONS[name] and value is not None and value.isdigit():
            nproc = int(value)
    rest = tokens[position:]
    if not rest:
        raise LaunchError(f"no training script after `{name}`")
    if module:
        target = ["-m", *rest]
    else:
        if not Path(rest[0]).is_file():
            raise LaunchError(f"script {rest[0]} does not exist")
        target = rest
    return Launch(name, [*prefix, *options], nproc), target


@dataclass
class Rendezvous:
    """Where the nodes of a multi-node `gpulint scale` meet: torchrun's c10d rendezvous, one per
    run of the sweep.  Run i meets at PORT + i under the id JOB-i: a node that starts run i + 1
    while another still ends run i must not find that run's store on the port (the agent that
    hosts it may be the one ending) nor its rendezvous under the id."""

    nnodes: int
    host: str
    port: int  # run i of the sweep uses port + i
    job: str

    @classmethod
    def parse(cls, nnodes: int, endpoint: str, job: str) -> Rendezvous:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise LaunchError(f"--rdzv-endpoint wants HOST:PORT, not {endpoint!r}")
        if nnodes < 2:
            raise LaunchError("--nnodes wants 2 or more nodes with --rdzv-endpoint")
        if not job or any(c.isspace() for c in job):
            raise LaunchError(f"--rdzv-id wants a word, not {job!r}")
        return cls(nnodes, host, int(port), job)

    def endpoint(self, run: int) -> str:
        return f"{self.host}:{self.port + run}"


def torchrun_prefix(
    nproc: int, interpreter: str | None = None, rendezvous: Rendezvous | None = None, run: int = 0
) -> list[str]:
    """The launcher part `gpulint scale` runs each size with: one node and a free rendezvous port,
    or, with `rendezvous`, this node's part of a multi-node run (the `run`-th of the sweep)."""
    launcher = [interpreter or sys.executable, "-m", "torch.distributed.run"]
    if rendezvous is None:
        nodes = ["--standalone", "--nnodes", "1"]
    else:
        nodes = [
            "--nnodes",
            str(rendezvous.nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            rendezvous.endpoint(run),
            "--rdzv-id",
            f"{rendezvous.job}-{run}",
        ]
    return [*launcher, *nodes, "--nproc-per-node", str(nproc)]
