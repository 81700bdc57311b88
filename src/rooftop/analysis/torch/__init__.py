"""PyTorch profiles: aten ops and NCCL kernels priced (ops) and Kineto traces judged kernel by kernel (kineto)."""
