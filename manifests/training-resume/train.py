"""A tiny training run whose checkpoint holds the full computation state.

    python train.py --steps 200 --save checkpoints/step-200.pt      # train from scratch
    python train.py --resume checkpoints/step-200.pt --steps 20 --log OUT/resume.jsonl
    python train.py --steps 30 --out OUT                             # OUT/model.pt, OUT/metrics.json

A 2-layer MLP regresses y = sin(x·w) on 512 synthetic points generated from a fixed data seed.
Each step draws its batch with torch's generator, jitters the inputs with NumPy's and scales them
with Python's, so a resumed run follows the original only if every RNG state was restored along
with the model, the optimizer, the scheduler and the step.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

DATA_SEED = 7
N_POINTS, N_FEATURES, HIDDEN, BATCH = 512, 8, 16, 32


def apply_determinism(seed: int) -> None:
    """Kernodeck's settings (KERNODECK_* variables) when Kernodeck is importable, else the seed."""
    os.environ.setdefault("KERNODECK_SEED", str(seed))
    try:
        from kernodeck.determinism import apply
    except ImportError:
        seed = int(os.environ["KERNODECK_SEED"])
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True)
        return
    apply()


def make_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(DATA_SEED)
    x = torch.randn(N_POINTS, N_FEATURES, generator=g)
    w = torch.randn(N_FEATURES, generator=g) / N_FEATURES**0.5
    y = torch.sin(x @ w).unsqueeze(1) + 0.05 * torch.randn(N_POINTS, 1, generator=g)
    return x, y


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(N_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))


def rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        # plain ints, so that torch.load(weights_only=True) can read it back
        "numpy": {
            "bit_generator": name,
            "keys": [int(k) for k in keys],
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        (
            n["bit_generator"],
            np.array(n["keys"], dtype=np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--steps", type=int, required=True, help="steps to run (after the checkpoint's, when resuming)"
    )
    p.add_argument("--resume", type=Path, help="checkpoint to continue from")
    p.add_argument("--save", type=Path, help="write a checkpoint with the full state at the end")
    p.add_argument("--log", type=Path, help="write {step, loss, lr} per step as JSON Lines")
    p.add_argument("--out", type=Path, help="write model.pt and metrics.json here")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--lr-scale",
        type=float,
        default=float(os.environ.get("TRAIN_LR_SCALE", "1")),
        help="multiply the learning rate (a deliberate perturbation)",
    )
    args = p.parse_args(argv)

    apply_determinism(args.seed)
    x, y = make_data()
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    step = 0
    if args.resume is not None:
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["lr_scheduler"])
        step = int(ckpt["step"])
        set_rng_state(ckpt["rng"])
    if args.lr_scale != 1:
        for group in opt.param_groups:
            group["lr"] *= args.lr_scale

    log = open(args.log, "w", encoding="utf-8") if args.log else None  # noqa: SIM115
    loss_value = float("nan")
    for _ in range(args.steps):
        step += 1
        idx = torch.randint(0, N_POINTS, (BATCH,))
        jitter = torch.from_numpy(np.random.normal(0.0, 0.01, size=(BATCH, N_FEATURES)).astype(np.float32))
        scale = 1.0 + 0.01 * random.uniform(-1.0, 1.0)
        pred = model((x[idx] + jitter) * scale)
        loss = nn.functional.mse_loss(pred, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        lr = opt.param_groups[0]["lr"]
        sched.step()
        loss_value = float(loss.item())
        if log is not None:
            log.write(json.dumps({"step": step, "loss": loss_value, "lr": lr}) + "\n")
    if log is not None:
        log.close()

    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "lr_scheduler": sched.state_dict(),
                "step": step,
                "rng": rng_state(),
            },
            args.save,
        )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.out / "model.pt")
        with torch.no_grad():
            full_loss = float(nn.functional.mse_loss(model(x), y).item())
        (args.out / "metrics.json").write_text(
            json.dumps({"steps": step, "final_loss": full_loss, "last_batch_loss": loss_value}, indent=1)
            + "\n",
            encoding="utf-8",
        )
    print(f"step {step}: batch loss {loss_value:.6f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
