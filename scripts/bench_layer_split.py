"""Does splitting a big layer into parts make a cold pull faster? An A/B of two local images
with the same files in different layers, interleaved so that a machine whose speed drifts
(this one's did by 1.7x within an hour) treats both alike.

Both go as zstd (skopeo, kerasenv push's level) to one throwaway registry on 127.0.0.1; then,
round after round, in alternating order, each is pulled into an empty throwaway containerd
(kerasenv's engine/containerd.py). Needs root, skopeo, docker-registry and containerd, like
`kerasenv bench-pull`; leaves nothing behind.

    sudo .venv/bin/python scripts/bench_layer_split.py kerasenv:tf2.21-cuda12.9 \\
        kerasenv-exp:tf2.21-cuda12.9-split --rounds 2 --out benchmarks/results/layer-split.json

How the split image of 2026-12-02 was built, and what it measured: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

from kerasenv.engine import containerd
from kerasenv.publish import compression, local_registry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="local image A (e.g. the variant as built)")
    p.add_argument("b", help="local image B (the same files, other layers)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = p.parse_args(argv)
    containerd.preflight()
    compression.preflight(compression.ZSTD)
    images = {"a": args.a, "b": args.b}
    doc = {"kind": "kerasenv-layer-split-ab", "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "compression": f"zstd level {compression.ZSTD_LEVEL}", "images": images,
           "push_s": {}, "compressed_bytes": {}, "big_layers_gb": {}, "pull_s": {"a": [], "b": []}}
    with local_registry.running() as reg:
        for key, ref in images.items():
            dest = f"{reg.address}/ab/{key}:zstd"
            doc["push_s"][key] = round(compression.push_zstd(ref, dest), 1)
            manifest = reg.manifest(f"ab/{key}", "zstd")
            doc["compressed_bytes"][key] = local_registry.layer_bytes(manifest)
            doc["big_layers_gb"][key] = [round(layer["size"] / 1e9, 2) for layer in manifest["layers"]
                                         if layer["size"] > 100_000_000]
            print(f"pushed {key} ({ref}): {doc['push_s'][key]} s, layers over 0.1 GB: {doc['big_layers_gb'][key]}",
                  file=sys.stderr)
        for r in range(args.rounds):
            for key in ("a", "b") if r % 2 == 0 else ("b", "a"):
                with containerd.running() as engine:
                    seconds = engine.pull(f"{reg.address}/ab/{key}:zstd")
                doc["pull_s"][key].append(round(seconds, 1))
                print(f"round {r + 1}: {key} cold pull {seconds:.1f} s", file=sys.stderr)
    doc["median_pull_s"] = {k: statistics.median(v) for k, v in doc["pull_s"].items()}
    doc["b_vs_a"] = round(doc["median_pull_s"]["b"] / doc["median_pull_s"]["a"], 3)
    text = json.dumps(doc, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
