"""GL6xx: distributed training -- how gradients and processes are shared between GPUs.

These rules fire on any device except GL602 (gloo is the right backend without CUDA): the
patterns cost the same whichever machine the script is linted for.
"""
