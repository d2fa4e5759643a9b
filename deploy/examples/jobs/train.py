#!/usr/bin/env python3
"""train.py — a small PyTorch training job that runs anywhere gpucloud runs
jobs (GPU or CPU), made to try the "PyTorch (single node)" job template.

It fits a two-layer network to a noisy sine it generates itself (no data to
download), prints one metric line per step for the platform's metric
collector:

    GPUCLOUD_METRIC {"step":12,"loss":0.0831}

and saves the model to $GPUCLOUD_JOB_DIR/checkpoint.pt (the job's directory,
kept after the job ends).  The flags are the template's hyperparameters:
--lr, --epochs, --batch-size, --hidden, --optimizer, --seed, --verbose,
--step-delay.

Try it: upload this file to your home (Files page, or
PUT /api/v1/files/home/train.py), then submit a job from the PyTorch
template (script ~/train.py) with the hyperparameters you like.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
from torch import nn


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="fit a small network to a noisy sine")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--epochs", type=int, default=3, help="passes over the data")
    p.add_argument("--batch-size", type=int, default=32, help="samples per step")
    p.add_argument("--hidden", type=int, default=64, help="hidden layer width")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--samples", type=int, default=512, help="generated training samples")
    p.add_argument("--verbose", action="store_true", help="print every step")
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="seconds to wait after each step (to watch a run live)")
    return p.parse_args(argv)


def metric(**values):
    # one line, flushed at once: the collector reads the log as it grows
    print("GPUCLOUD_METRIC " + json.dumps(values, separators=(",", ":")), flush=True)


def main(argv=None):
    args = parse_args(argv)
    if args.lr <= 0 or args.epochs < 1 or args.batch_size < 1 or args.hidden < 1:
        print("train.py: lr, epochs, batch-size and hidden must be positive", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    job_dir = os.environ.get("GPUCLOUD_JOB_DIR", os.getcwd())
    print(f"train.py: torch {torch.__version__} on {device}, job {os.environ.get('GPUCLOUD_JOB_ID', '-')}, "
          f"hyperparameters {vars(args)}", flush=True)

    # the data: y = sin(x) + noise on [-pi, pi]
    x = torch.rand(args.samples, 1) * 2 * math.pi - math.pi
    y = torch.sin(x) + 0.05 * torch.randn_like(x)
    x, y = x.to(device), y.to(device)

    model = nn.Sequential(nn.Linear(1, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1)).to(device)
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()

    step, t0, loss = 0, time.time(), None
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(args.samples, device=device)
        for i in range(0, args.samples, args.batch_size):
            idx = perm[i:i + args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            step += 1
            metric(step=step, loss=round(loss.item(), 6))
            if args.verbose:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}", flush=True)
            if args.step_delay > 0:
                time.sleep(args.step_delay)
        with torch.no_grad():
            full = loss_fn(model(x), y).item()
        print(f"epoch {epoch}/{args.epochs}: loss {full:.6f}", flush=True)
        if not math.isfinite(full):
            print("train.py: the loss diverged (try a smaller --lr)", file=sys.stderr)
            return 1

    path = os.path.join(job_dir, "checkpoint.pt")
    torch.save({"model": model.state_dict(), "args": vars(args), "steps": step, "loss": full}, path)
    print(f"saved {path} after {step} steps in {time.time() - t0:.1f} s (final loss {full:.6f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
