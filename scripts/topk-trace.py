"""Phase times of the cluster kernel (build with -DFLYOPS_TOPK_TRACE=1; scripts only)."""
import torch
import flyops  # noqa: F401

torch.manual_seed(0)
for rows, n, k, dt in [(1, 262144, 50, torch.float32), (1, 128256, 1024, torch.float32),
                       (1, 262144, 1024, torch.float32), (64, 32000, 50, torch.float32),
                       (64, 262144, 50, torch.float32), (256, 128256, 1024, torch.float32)]:
    x = torch.randn(rows, n, device="cuda").to(dt)
    for _ in range(3):
        torch.topk(x, k)
    torch.cuda.synchronize()
    print(rows, n, k, dt, flush=True)
    torch.topk(x, k)
    torch.cuda.synchronize()
