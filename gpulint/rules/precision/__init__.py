"""GL4xx: precision and compilation -- is the GPU doing the cheap kind of arithmetic?

GL401, GL403 and GL404 are whole-module hints: they look at a module that trains a PyTorch model on
an accelerator with its own loop (a `.backward()` in a step loop: `ctx.torch.own_loop_backward_calls`)
and report once, where the fix belongs.  Modules whose precision and compilation are configured
elsewhere -- Accelerate, Fabric, DeepSpeed, Lightning modules (the Trainer's `precision=`, GL803) --
are left alone.  Any mention of the feature outside a comment (an `--amp` flag, `args.compile`)
counts as handled: a hint that the user has already considered is noise.
"""
