"""GL3xx: work that belongs every N steps but runs on every step (validation, logging, checkpoints).

These are frequency rules: they fire on any device, because the time goes whether or not a GPU is
waiting.  Code under an interval guard (`if step % 100 == 0:`), in an `except` handler, or in a
branch that leaves the iteration (`if not torch.isfinite(loss): print(...); continue`) is an event,
not per-step work, and is not reported (`LoopModel.per_step_work`).
"""
