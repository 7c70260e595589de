"""`kerasenv sif`: an Apptainer SIF from a local image (hpc/sif.py)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..matrix.schema import Matrix


def register(subparsers) -> None:
    from .sif import COMPRESSIONS

    s = subparsers.add_parser(
        "sif", help="an Apptainer image (SIF) from a local image, for clusters without Docker "
                    "(docs/using/hpc-apptainer.md): `apptainer run kerasenv-ID.sif` is the smoke training")
    s.add_argument("id", metavar="ID|IMAGE", help="a variant id (kerasenv:<id>) or any local image")
    s.add_argument("--output", type=Path, help="the SIF (default: ./kerasenv-<id>.sif); replaced if there")
    s.add_argument("--compression", choices=list(COMPRESSIONS), default="gzip",
                   help="mksquashfs's compressor: gzip (default, Apptainer's own: every runtime reads it) or zstd "
                        "(about 20x quicker to build at the same size; needs zstd in the kernel's squashfs or squashfuse)")
    s.set_defaults(handler=_cmd_sif)


def _cmd_sif(args, matrix: Matrix) -> int:
    from ..engine import docker_client
    from . import sif

    variant = next((v for v in matrix.variants if v.id == args.id), None)
    if variant is None and ":" not in args.id:
        raise UsageError(f"unknown variant {args.id!r}: `kerasenv list` names them (or give an image, NAME:TAG)")
    ref = variant.image_ref if variant else args.id
    name = variant.id if variant else args.id.replace("/", "_").replace(":", "_")
    output = args.output or Path(f"kerasenv-{name}.sif")
    command = sif.apptainer_command()  # before Docker: a missing apptainer is the first thing to say
    done = sif.build_sif(docker_client.client(), ref, output, command=command, compression=args.compression)
    print(f"{done['sif']}: {done['sif_bytes'] / 1e6:.0f} MB from {ref} ({done['image_bytes'] / 1e9:.2f} GB, {done['compression']}) in "
          f"{done['save_s'] + done['build_s']:.0f} s (docker save {done['save_s']:.0f} s, apptainer build "
          f"{done['build_s']:.0f} s); run it: apptainer run {done['sif']}")
    return 0
