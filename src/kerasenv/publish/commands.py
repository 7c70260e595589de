"""`kerasenv push`, `pull`, `tags` and `matrix`: what a variant is called in a registry, and
moving images there and back.

`matrix` (the CI's strategy matrix) lives here rather than in matrix/ because each row
carries the variant's full tag, publish/tags' fact, and matrix/ may not import publish/.
"""

from __future__ import annotations

import json

from ..matrix.schema import Matrix
from . import compression


def register(subparsers) -> None:
    for command, text in (("push", "tag (short, full, latest-*) and push variant images to a registry"),
                          ("pull", "pull variant images and check their labels against the matrix")):
        s = subparsers.add_parser(command, help=text)
        s.add_argument("ids", nargs="+", metavar="ID")
        s.add_argument("--registry", required=True, help="e.g. ghcr.io/you, or 127.0.0.1:5000")
        s.add_argument("--json", action="store_true", help="one JSON object per image on stdout")
        s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"),
                       help="push: only that architecture's image, under <id>-amd64 / <id>-arm64 (variants with an "
                            "arm64 image); pull: that architecture's image of the tag (default: the engine's own)")
        if command == "push":
            s.add_argument("--compression", choices=compression.CHOICES, default=compression.GZIP,
                           help="gzip (default; every engine), zstd (the `-zstd` tags: Docker >= 23, containerd), "
                                "or both")
            s.add_argument("--index", action="store_true",
                           help="only write each tag as the image index over the <id>-amd64 and <id>-arm64 tags "
                                "already pushed (the workflow runs it once both architectures passed)")
        else:
            s.add_argument("--compression", choices=(compression.GZIP, compression.ZSTD), default=compression.GZIP,
                           help="zstd pulls the `-zstd` tag (Docker >= 23; older Docker is refused with the gzip tag)")
        s.set_defaults(handler=_cmd_transfer)

    s = subparsers.add_parser("matrix", help="the variant matrix for CI (GitHub Actions `fromJSON`)")
    s.add_argument("--github", action="store_true", required=True, help="a JSON list for strategy.matrix.include")
    s.add_argument("--family", choices=("cpu", "cuda", "rocm"), action="append",
                   help="only these families (repeatable; default all)")
    s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"),
                   help="only the variants with an image for this platform (linux/arm64: the arm64 jobs)")
    s.set_defaults(handler=_cmd_matrix)

    s = subparsers.add_parser("tags", help="the tags of each variant")
    s.add_argument("ids", nargs="*", metavar="ID")
    s.add_argument("--registry", default="", help="prefix the repository with this registry")
    s.set_defaults(handler=_cmd_tags)


def _cmd_transfer(args, matrix: Matrix) -> int:
    from . import registry
    from ..engine import docker_client

    client = docker_client.client()
    variants = matrix.select(args.ids)
    if args.command == "push":
        compression.preflight(args.compression)  # before the first image goes
    for v in variants:
        if args.command == "push":
            transfers = registry.push(client, matrix, v, args.registry, args.compression,
                                      platform=args.platform, index_only=args.index)
        else:
            transfers = [registry.pull(client, matrix, v, args.registry, args.compression, platform=args.platform)]
        for t in transfers:
            line = {"variant": v.id, "ref": t.ref, "compression": t.compression, "digest": t.digest,
                    "seconds": round(t.seconds, 1), "layers_transferred": t.layers_sent,
                    "layers_already_there": t.layers_skipped,
                    "stale_labels": {k: list(pair) for k, pair in t.stale.items()}}
            print(json.dumps(line) if args.json else
                  f"{t.ref}@{t.digest}\t{t.compression}\t{t.seconds:.0f} s\t{t.layers_sent} layers sent, "
                  f"{t.layers_skipped} already there")
    return 0


def _cmd_matrix(args, matrix: Matrix) -> int:
    from . import tags

    rows = []
    for v in matrix.variants:
        if args.family and v.family not in args.family:
            continue
        if getattr(args, "platform", None) and args.platform not in v.platforms:
            continue
        stack = {"cuda": f"CUDA {v.cuda} / cuDNN {v.cudnn}", "rocm": f"ROCm {v.rocm}"}.get(v.family, "CPU")
        rows.append({"id": v.id, "family": v.family, "name": f"{v.id} ({v.framework_label}, {stack})",
                     "backend": v.backend, "framework_version": v.framework_version, "cuda": v.cuda or "", "full_tag": tags.full_tag(v),
                     # "true"/"false": a workflow `if:` compares it as a string
                     "arm64": "true" if v.arm64 else "false"})
    print(json.dumps(rows, separators=(",", ":")))
    return 0


def _cmd_tags(args, matrix: Matrix) -> int:
    from . import tags

    for v in (matrix.select(args.ids) if args.ids else matrix.variants):
        repo = tags.repository(args.registry)
        print(" ".join(f"{repo}:{t}" for t in tags.tags(matrix, v)))
    return 0
