"""ddp.py — a distributed data-parallel PyTorch job for gpucloud.

Submit it with "members": N (one member per node, see README "Distributed
jobs"); gpucloud starts one process per member with MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK (and NODE_RANK, LOCAL_RANK=0) set, so no
torchrun is needed (Debian's torchrun does not start on Python 3.11).

What it does: joins the process group (gloo on CPU, NCCL when every member
has a GPU), all-reduces rank + 1 and prints the sum on every rank (N(N+1)/2:
proof that all ranks joined), then trains a small linear model with
DistributedDataParallel on generated data.  Rank 0 prints
GPUCLOUD_METRIC {"step": N, "loss": x} lines (the job's metrics) and writes
$GPUCLOUD_JOB_DIR/checkpoint.pt.

Hyperparameters (the job's "hyperparameters"): steps (default 20), lr
(default 0.05), batch (default 64).
"""
import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def hparams():
    try:
        return json.loads(os.environ.get("GPUCLOUD_HPARAMS_JSON") or "{}")
    except ValueError:
        return {}


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    hp = hparams()
    steps = int(hp.get("steps", 20))
    lr = float(hp.get("lr", 0.05))
    batch = int(hp.get("batch", 64))
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    print(f"rank {rank} of {world}: joining {os.environ['MASTER_ADDR']}:"
          f"{os.environ['MASTER_PORT']} ({backend})", flush=True)
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")

    # every rank contributes rank + 1: the sum is world * (world + 1) / 2
    t = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    print(f"rank {rank}: all_reduce sum = {int(t.item())}", flush=True)

    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Linear(16, 1).to(device)
    ddp = DDP(model, device_ids=[0] if use_cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    w_true = torch.arange(16, dtype=torch.float32) / 16.0
    for step in range(1, steps + 1):
        x = torch.randn(batch, 16, generator=gen)
        y = x @ w_true + 0.01 * torch.randn(batch, generator=gen)
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(ddp(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        # the mean loss over the ranks
        lt = loss.detach().clone()
        dist.all_reduce(lt, op=dist.ReduceOp.SUM)
        if rank == 0:
            print("GPUCLOUD_METRIC " + json.dumps({"step": step, "loss": round(lt.item() / world, 6)}),
                  flush=True)

    if rank == 0:
        out = os.path.join(os.environ.get("GPUCLOUD_JOB_DIR", "."), "checkpoint.pt")
        torch.save({"steps": steps, "world_size": world, "model": model.state_dict()}, out)
        print(f"rank 0: wrote {out}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
