"""Test-session settings."""

import torch

# The test models are tiny: one thread is as fast as two, and it keeps timings stable when
# another process shares the machine (OpenMP threads spin-wait badly under contention).
torch.set_num_threads(1)
