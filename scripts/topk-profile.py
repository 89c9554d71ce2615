"""A few TopK calls for ncu (scripts only: not part of the package)."""
import sys
import torch
import flyops  # noqa: F401

torch.manual_seed(0)
cases = [(64, 262144, 50, torch.float32), (1, 128256, 1, torch.bfloat16), (1, 128256, 1024, torch.bfloat16),
         (1, 1 << 24, 100, torch.float32), (65536, 256, 8, torch.float32)]
for rows, n, k, dt in cases:
    x = torch.randn(rows, n, device="cuda").to(dt)
    for _ in range(2):
        torch.topk(x, k)
torch.cuda.synchronize()
