"""`kerasenv` command line: argument parsing and error reporting only."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from . import __version__
from .errors import EXIT_INTERRUPTED, EXIT_OK, KerasenvError, UsageError
from .matrix import DEFAULT_MATRIX, REPO_ROOT, Matrix, load


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kerasenv",
        description="Versioned TensorFlow + Keras images that prove they work on your GPU.")
    p.add_argument("--version", action="version", version=f"kerasenv {__version__}")
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX,
                   help="version matrix file (default: images/matrix.toml)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("list", help="list the variants of the matrix")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="the README variant table")
    fmt.add_argument("--json", action="store_true", help="one object per variant")
    fmt.add_argument("--ids", action="store_true", help="ids only, one a line")

    s = sub.add_parser("generate", help="write Dockerfiles and the README table from the matrix")
    s.add_argument("--check", action="store_true",
                   help="write nothing; fail when a committed file differs (drift)")

    s = sub.add_parser("lock", help="re-resolve hash-locked requirements with uv (needs PyPI)")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: all but ROCm)")
    s.add_argument("--ca-cert", help="CA bundle for PyPI behind a TLS-intercepting proxy")

    s = sub.add_parser("build", help="build variant images as kerasenv:<id>")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants to build")
    s.add_argument("--all", action="store_true", help="every variant except ROCm")
    s.add_argument("--base-image", help="FROM for the Debian-based variants "
                   "(default: the matrix's, debian:bookworm-slim; env BASE_IMAGE)")
    s.add_argument("--ca-cert", help="extra CA trusted in the builder stages only (env "
                   "KERASENV_CA_CERT; default: the host's PIP_CERT / REQUESTS_CA_BUNDLE / SSL_CERT_FILE)")
    s.add_argument("--no-ca-cert", action="store_true", help="do not pass any CA to the build")
    s.add_argument("--no-cache", action="store_true", help="build without Docker's layer cache")

    s = sub.add_parser("base-offline", help="make the Debian base image with debootstrap (no registry)")
    s.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    s.add_argument("--tag", help="image name (default: debian:<suite>-slim)")
    s.add_argument("--mirror", default="http://deb.debian.org/debian", help="Debian mirror")
    s.add_argument("--force", action="store_true", help="rebuild even if the tag exists")

    s = sub.add_parser("size", help="image sizes, layer attribution, shared bytes, budgets")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: every one built locally)")
    s.add_argument("--check", action="store_true", help="exit 1 when an image exceeds its budget")

    s = sub.add_parser("clean", help="remove the project's containers and dangling images")
    s.add_argument("--images", action="store_true", help="also remove every kerasenv:<id> image")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # SIGTERM is handled like Ctrl-C so `finally` blocks clean up (containers, temp files).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        matrix = load(args.matrix)
        return COMMANDS[args.command](args, matrix) or EXIT_OK
    except KerasenvError as exc:
        if args.debug:
            raise
        print(f"kerasenv: error: {exc.message}", file=sys.stderr)
        if exc.details:
            print(exc.details, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kerasenv: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _cmd_list(args, matrix: Matrix) -> int:
    from . import table

    if args.markdown:
        sys.stdout.write(table.markdown(matrix))
    elif args.ids:
        print("\n".join(matrix.ids))
    elif args.json:
        rows = []
        for v in matrix.variants:
            row = {k: val for k, val in vars(v).items() if val is not None}
            row.update(image=v.image_ref, min_driver=v.min_driver, min_driver_ptx_jit=v.min_driver_ptx,
                       cuda_compute_capabilities=list(v.compute_capabilities))
            rows.append({k: val for k, val in row.items() if val not in (None, [])})
        print(json.dumps(rows, indent=2))
    else:
        for v in matrix.variants:
            stack = {"cuda": f"CUDA {v.cuda} / cuDNN {v.cudnn}", "rocm": f"ROCm {v.rocm}"}.get(v.family, "CPU")
            print(f"{v.id:<18} TF {v.tensorflow:<7} Keras {v.keras:<7} Python {v.python:<5} {stack}")
    return 0


def _cmd_generate(args, matrix: Matrix) -> int:
    from . import generate

    root = matrix.path.parent.parent
    if args.check:
        drift = generate.check(matrix, root)
        for item in drift:
            print(f"drift: {item}", file=sys.stderr)
        if drift:
            raise KerasenvError(f"{len(drift)} generated file(s) out of date with {matrix.path}: "
                                "run `make generate` (and `kerasenv lock ID` for locks)")
        print(f"generated files match {matrix.path}")
        return 0
    for path in generate.write(matrix, root):
        print(f"wrote {path}")
    return 0


def _cmd_lock(args, matrix: Matrix) -> int:
    from . import locks

    ids = args.ids or [v.id for v in matrix.variants if v.family != "rocm"]
    for v in matrix.select(ids):
        if v.family == "rocm":
            print(f"{v.id}: nothing to lock (AMD's base image brings TensorFlow)")
            continue
        pins = locks.resolve(v, ca_cert=args.ca_cert)
        for path in locks.write(v, matrix.path.parent / v.id, pins):
            print(f"wrote {path}")
    return 0


def _cmd_build(args, matrix: Matrix) -> int:
    import os

    from . import build, docker_client

    if args.all:
        variants = [v for v in matrix.variants if v.family != "rocm"]
    elif args.ids:
        variants = matrix.select(args.ids)
    else:
        raise UsageError(f"name the variants to build (or --all); valid ids: {', '.join(matrix.ids)}")
    ca_cert = None if args.no_ca_cert else build.default_ca_cert(args.ca_cert)
    if ca_cert:
        build.read_ca_cert(ca_cert)  # fail before touching Docker
    client = docker_client.client()
    results = build.build_many(client, matrix, variants, base_image=args.base_image or os.environ.get("BASE_IMAGE"),
                               ca_cert=ca_cert, no_cache=args.no_cache)
    for r in results:
        print(f"{r.variant.image_ref}\t{r.size_bytes / 1e9:.2f} GB\t{r.seconds:.0f} s")
    return 0


def _cmd_base_offline(args, matrix: Matrix) -> int:
    from . import base_offline, docker_client

    base_offline.make(docker_client.client(), suite=args.suite, tag=args.tag, mirror=args.mirror,
                      force=args.force, say=lambda m: print(m, file=sys.stderr))
    return 0


def _cmd_clean(args, matrix: Matrix) -> int:
    from . import docker_client

    client = docker_client.client()
    label = docker_client.PROJECT_LABEL
    removed = 0
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True)
        print(f"removed container {container.name}")
        removed += 1
    pruned = client.images.prune(filters={"dangling": True, "label": label})
    for item in pruned.get("ImagesDeleted") or []:
        print(f"removed dangling image {item.get('Deleted') or item.get('Untagged')}")
    if args.images:
        for v in matrix.variants:
            if client.images.list(name=v.image_ref):
                client.images.remove(v.image_ref)
                print(f"removed image {v.image_ref}")
    print(f"clean: {removed} container(s), {pruned.get('SpaceReclaimed', 0) / 1e6:.0f} MB reclaimed")
    return 0


def _cmd_size(args, matrix: Matrix) -> int:
    from . import docker_client, sizes

    client = docker_client.client()
    variants = matrix.select(args.ids) if args.ids else [
        v for v in matrix.variants if client.images.list(name=v.image_ref)]
    measured = {}
    for v in variants:
        if not client.images.list(name=v.image_ref):
            raise UsageError(f"{v.image_ref} is not built here: run `make build VARIANT={v.id}`")
        measured[v.id] = sizes.measure(client, v.image_ref, v.base_image)
    over = []
    print(f"{'image':<26}{'total':>9}{'budget':>9}" + "".join(f"{p:>12}" for p in sizes.PARTS))
    for v in variants:
        m = measured[v.id]
        budget = f"{v.size_budget_mb / 1000:.2f}" if v.size_budget_mb else "-"
        print(f"{v.image_ref:<26}{m.total / 1e9:>8.2f}G{budget:>8}G"
              + "".join(f"{m.parts.get(p, 0) / 1e6:>11.0f}M" for p in sizes.PARTS))
        if m.over_budget(v):
            over.append(v)
    ids = list(measured)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            shared = sizes.shared_bytes(measured[a], measured[b])
            if shared > 100e6:
                print(f"shared by {a} and {b}: {shared / 1e9:.2f} GB")
    if args.check and over:
        raise KerasenvError("over budget: " + ", ".join(
            f"{v.id} {measured[v.id].total / 1e9:.2f} GB > {v.size_budget_mb / 1000:.2f} GB" for v in over))
    return 0


COMMANDS = {
    "list": _cmd_list,
    "generate": _cmd_generate,
    "lock": _cmd_lock,
    "build": _cmd_build,
    "base-offline": _cmd_base_offline,
    "size": _cmd_size,
    "clean": _cmd_clean,
}
