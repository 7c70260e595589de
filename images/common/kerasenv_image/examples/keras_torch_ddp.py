"""A Keras model trained by PyTorch's DistributedDataParallel in a custom loop, one process per
container (or GPU), under torchrun: the way Keras's own guide trains Keras on PyTorch across
processes ("Multi-GPU distributed training with PyTorch", keras-io
guides/distributed_training_with_torch.py), written for torchrun's env:// rendezvous (the guide
starts its processes itself with torch.multiprocessing on one host) and for the CPU too (gloo).
Keras 3.15's `fit` cannot do this on PyTorch: keras.distribution for torch is on Keras's master,
unreleased (docs/using/multi-worker.md).

    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --master-addr HOST0 --master-port 29500 \
        -m kerasenv_image.examples.keras_torch_ddp [--epochs 2] [--batch-size 64]

`kerasenv multiworker torch2.15-cuda13.2 --workers 2` runs exactly that in two containers. The data
are the smoke training's synthetic images (no download). At the end every process's weights are
compared through an all-gather of their digests: the run fails (exit 4) unless the replicas agree.
Rank 0 prints one JSON line: the loss per epoch, samples/s and the digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "torch")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


def get_model(keras):
    inputs = keras.Input(shape=(28, 28, 1))
    x = keras.layers.Conv2D(16, 3, activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(32, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(4)(x)
    return keras.Model(inputs, outputs)


def digest(module) -> str:
    h = hashlib.sha256()
    for tensor in module.state_dict().values():
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    import keras
    import numpy as np
    import torch
    import torch.distributed as dist

    from kerasenv_image.smoke.data import synthetic_images

    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        print(f"keras_torch_ddp: {', '.join(missing)} not set: start it with torchrun (see the module's docstring)",
              file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if gpu:
        torch.cuda.set_device(local_rank)
    # A bounded rendezvous: a peer that never comes is an error, not a hang.
    from datetime import timedelta

    dist.init_process_group("nccl" if gpu else "gloo", timeout=timedelta(seconds=int(os.environ.get(
        "KERASENV_INIT_TIMEOUT", "120"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{local_rank}" if gpu else "cpu")

    keras.utils.set_random_seed(args.seed)  # the same initial weights in every process
    images, labels = synthetic_images(args.samples, args.seed)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(images.astype(np.float32) / 255.0),
                                             torch.from_numpy(labels.astype(np.int64)))
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world, rank=rank,
                                                              shuffle=True, seed=args.seed, drop_last=True)
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=args.batch_size, drop_last=True)

    model = get_model(keras).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if gpu else None)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=args.learning_rate)
    loss_fn = torch.nn.CrossEntropyLoss()

    losses, started = [], time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = loss_fn(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            total, count = total + loss.item(), count + 1
        mean = torch.tensor([total / max(count, 1)], device=device)
        dist.all_reduce(mean)
        losses.append(round(float(mean.item()) / world, 6))
        if rank == 0:
            print(f"keras_torch_ddp: epoch {epoch + 1}/{args.epochs}: loss {losses[-1]:.4f}", file=sys.stderr,
                  flush=True)
    seconds = time.perf_counter() - started
    mine = digest(model)
    every: list = [None] * world
    dist.all_gather_object(every, mine)
    agree = len(set(every)) == 1
    if rank == 0:
        print(json.dumps({"status": "ok" if agree else "failed", "processes": world, "backend": dist.get_backend(),
                          "loss_per_epoch": losses, "learned": losses[-1] < losses[0],
                          "samples_per_second": round(args.epochs * len(loader) * args.batch_size * world / seconds, 1),
                          "weights_sha256": mine, "replicas_agree": agree}), flush=True)
    dist.destroy_process_group()
    if not agree:
        print(f"keras_torch_ddp: the replicas ended with different weights: {sorted(set(every))}", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
