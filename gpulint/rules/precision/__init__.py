"""GL4xx: precision, compilation and kernel choice -- is the GPU doing the cheap kind of arithmetic?

GL401, GL403 and GL404 are whole-module hints: they look at a module that trains a PyTorch model on
an accelerator with its own loop (a `.backward()` in a step loop: `ctx.torch.own_loop_backward_calls`)
and report once, where the fix belongs.  A module trains with its own loop when it takes optimizer
steps in a step loop (an optimizer built here, or one from `model.configure_optimizers()` or a
parameter).  Precision configured elsewhere -- Accelerate, Fabric, DeepSpeed, Lightning (the
Trainer's `precision=`, GL803) -- leaves GL401 and GL404 out; compilation configured elsewhere
(Accelerate's and DeepSpeed's dynamo settings) leaves GL403 out, while Lightning and Fabric leave
`torch.compile` to the script.  Any mention of the feature outside a comment (an `--amp` flag, `args.compile`)
counts as handled: a hint that the user has already considered is noise.

GL405 (`cudnn.benchmark`) and GL407 (`channels_last`) are whole-module hints of the same kind, for
convolutional networks (`ctx.torch.convolution_dims`); GL406 reports a `cudnn.deterministic = True`
set on every run.
"""
