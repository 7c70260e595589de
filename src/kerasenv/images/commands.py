"""`kerasenv generate`, `lock`, `build`, `base-offline`, `sbom`, `kernel-targets` and `clean`:
the images' files, their builds, what they carry and their removal.

(`kerasenv size` is bench/commands.py's: its JSON is the benchmark report's input, and that
way images/ imports nothing of bench/.)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import KerasenvError, UsageError
from ..matrix.schema import Matrix


def register(subparsers) -> None:
    s = subparsers.add_parser("generate", help="write Dockerfiles and the README table from the matrix")
    s.add_argument("--check", action="store_true",
                   help="write nothing; fail when a committed file differs (drift)")
    s.set_defaults(handler=_cmd_generate)

    s = subparsers.add_parser("lock", help="re-resolve hash-locked requirements with uv (needs PyPI)")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants (default: all but ROCm)")
    s.add_argument("--ca-cert", help="CA bundle for PyPI behind a TLS-intercepting proxy")
    s.add_argument("--jupyter-only", action="store_true",
                   help="re-lock only the JupyterLab layer (requirements-jupyter.lock), on the variant's locks")
    s.set_defaults(handler=_cmd_lock)

    s = subparsers.add_parser("layers", help="an image's layers, or which layers two builds share and what a "
                              "user holding the first fetches for the second, per kind of client")
    s.add_argument("old", metavar="IMAGE", help="the image a user holds (e.g. kerasenv:tf2.21-cpu)")
    s.add_argument("new", metavar="NEW", nargs="?", help="its rebuild (e.g. a `kerasenv build --tag` of it)")
    s.add_argument("--only-last", type=int, metavar="N",
                   help="exit 1 unless every layer but the last N is the same (issue 52: a security rebuild "
                        "changes the last layer only)")
    s.set_defaults(handler=_cmd_layers)

    s = subparsers.add_parser("build", help="build variant images as kerasenv:<id>")
    s.add_argument("ids", nargs="*", metavar="ID", help="variants to build")
    s.add_argument("--all", action="store_true", help="every variant except ROCm")
    s.add_argument("--base-image", help="FROM for the variants on the Debian suite it names (e.g. "
                   "debian:trixie-slim@sha256:...; one naming no suite: the default CPU image's); the other "
                   "suite's variants and AMD's keep their base (env BASE_IMAGE)")
    s.add_argument("--ca-cert", help="extra CA trusted in the builder stages only (env "
                   "KERASENV_CA_CERT; default: the host's PIP_CERT / REQUESTS_CA_BUNDLE / SSL_CERT_FILE)")
    s.add_argument("--no-ca-cert", action="store_true", help="do not pass any CA to the build")
    s.add_argument("--no-cache", action="store_true", help="build without Docker's layer cache")
    s.add_argument("--network", metavar="MODE",
                   help="the build steps' network, as `docker build --network`: host reaches a proxy on this "
                        "machine's loopback; none shows what a build without a route to Debian's archive says")
    s.add_argument("--builder", choices=("auto", "buildkit", "classic"),
                   help="auto (default; env KERASENV_BUILDER): BuildKit through the docker CLI where one here can run "
                        "it (buildx, or a CLI older than 23), else the classic builder through the Engine API; "
                        "buildkit: fail where it cannot; classic: never BuildKit (Podman always builds classic)")
    s.add_argument("--debian-updates", metavar="STATE",
                   help="the Debian archive state to apply, in the io.kerasenv.debian-updates label's form; each "
                        "variant takes its own suite's entries (env KERASENV_DEBIAN_UPDATES; default: the archive "
                        "now, as `kerasenv debian-updates` prints it for every suite); `point-release`: the suite's point "
                        "release alone, no -updates or -security fix (an unpatched image, to measure what a "
                        "security rebuild changes)")
    s.add_argument("--tag", metavar="NAME:TAG",
                   help="tag the one variant's image so, not kerasenv:<id> (e.g. a second build whose layers "
                        "to compare: `kerasenv layers`)")
    s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"), default="linux/amd64",
                   help="linux/arm64: the variant's arm64 image, kerasenv:<id>-arm64 (on amd64 under qemu: "
                        "scripts/arm64-emulation.sh; the base from `make base-offline PLATFORM=linux/arm64`)")
    flavour = s.add_mutually_exclusive_group()
    flavour.add_argument("--jupyter", action="store_true",
                         help="also build the JupyterLab flavour kerasenv:<id>-jupyter (cpu and cuda variants)")
    flavour.add_argument("--jupyter-only", action="store_true",
                         help="build only the JupyterLab flavour, on the variant image already built")
    s.add_argument("--drop-build-cache", action="store_true",
                   help="remove each build's builder-stage images once its image is built: about the image's "
                        "size again in disk; the next build of that variant starts cold")
    s.add_argument("--wait-for-disk", type=float, default=0, metavar="SECONDS",
                   help="when Docker's disk has less free than a build needs (about twice the image's size "
                        "budget), wait up to SECONDS for it (other builds' images going) instead of only "
                        "warning; `make test`'s lanes use it")
    s.set_defaults(handler=_cmd_build)

    s = subparsers.add_parser("drop-build-cache", help="remove the builder-stage images the last build of each "
                                                       "ID here left (as --drop-build-cache would have), without building")
    s.add_argument("ids", nargs="+", metavar="ID", help="variants")
    s.set_defaults(handler=_cmd_drop_build_cache)

    s = subparsers.add_parser("base-offline", help="make the matrix's Debian base images with debootstrap "
                                                   "(no registry), each one not here yet")
    s.add_argument("--suite", help="only this Debian suite's (default: every suite the matrix's base images name)")
    s.add_argument("--tag", help="image name, with --suite (default: the matrix's base of that suite, else "
                                 "debian:<suite>-slim)")
    s.add_argument("--mirror", default="http://deb.debian.org/debian", help="Debian mirror")
    s.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"), default="linux/amd64",
                   help="linux/arm64: the arm64 base of each suite the matrix's arm64 images use, "
                        "debian:<suite>-slim-arm64, under qemu (scripts/arm64-emulation.sh)")
    s.set_defaults(handler=_cmd_base_offline)

    s = subparsers.add_parser("sbom", help="CycloneDX JSON SBOM of an image's Python environment")
    s.add_argument("id", metavar="ID")
    s.add_argument("-o", "--output", type=Path, help="file to write (default: sbom-<id>.cdx.json; - for stdout)")
    s.set_defaults(handler=_cmd_sbom)

    s = subparsers.add_parser("kernel-targets", help="the SASS/PTX targets a built CUDA image's libraries carry, "
                                                     "compared with images/ID/kernel-targets.json")
    s.add_argument("id", metavar="ID")
    s.add_argument("--write", action="store_true", help="record them in images/ID/kernel-targets.json")
    s.add_argument("--platform", choices=("linux/amd64", "linux/arm64"), default="linux/amd64",
                   help="linux/arm64: the arm64 image's (kerasenv:ID-arm64), in images/ID/kernel-targets-arm64.json")
    s.set_defaults(handler=_cmd_kernel_targets)

    s = subparsers.add_parser("clean", help="remove the project's containers, networks and superseded images "
                                            "(keeps Docker's build cache)")
    s.add_argument("--images", action="store_true",
                   help="also remove every kerasenv:<id> image and the build cache of its stages")
    s.set_defaults(handler=_cmd_clean)


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
    selected = matrix.select(ids)
    # What the index serves today, for each Python locked: the record behind every "newest" in the docs.
    import datetime

    day = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    for python in sorted({v.python for v in selected if v.family != "rocm"}):
        newest = locks.newest_on_index(python, ca_cert=args.ca_cert)
        path = locks.record_newest(matrix.path.parent, python, newest, day)
        print(f"wrote {path} (Python {python}: {', '.join(f'{k} {ver}' for k, ver in newest.items())})")
    for v in selected:
        if v.family == "rocm":
            print(f"{v.id}: nothing to lock (AMD's base image brings TensorFlow)")
            continue
        folder = matrix.path.parent / v.id
        if not args.jupyter_only:
            for path in locks.write(v, folder, locks.resolve(v, ca_cert=args.ca_cert, folder=folder)):
                print(f"wrote {path}")
            if v.arm64:
                print(f"wrote {locks.write_arm64(v, folder, locks.resolve_arm64(v, folder, ca_cert=args.ca_cert))}")
        if matrix.jupyter and v in matrix.with_jupyter():
            lab = matrix.jupyter.jupyterlab
            pins = locks.resolve_jupyter(v, folder, lab, ca_cert=args.ca_cert)
            print(f"wrote {locks.write_jupyter(v, folder, lab, pins)} ({len(pins)} packages)")
    return 0


def _cmd_layers(args, matrix: Matrix) -> int:
    from . import layers
    from ..engine import docker_client

    client = docker_client.client()
    if args.new is None:
        if args.only_last is not None:
            raise UsageError("--only-last compares two images: name the rebuild too")
        for index, layer in enumerate(layers.of_image(client, args.old)):
            print(f"{index:>2}  {layer.size / 1e6:>9.1f} MB  {layer.diff_id}  {layer.created_by[:90]}")
        return 0
    comparison = layers.compare(client, args.old, args.new)
    for line in layers.report(comparison, args.old, args.new):
        print(line)
    if args.only_last is not None and not comparison.only_last_changed(args.only_last):
        first = comparison.first_changed
        print(f"kerasenv layers: {args.new} differs from {args.old} from layer {first} up "
              f"({comparison.new[first].created_by[:80]}), not only in its last {args.only_last}: that layer "
              "depends on something that changed between the builds", file=sys.stderr)
        return 1
    return 0


def _cmd_build(args, matrix: Matrix) -> int:
    from . import build, disk
    from ..engine import docker_client

    if args.wait_for_disk < 0:
        raise UsageError(f"--wait-for-disk {args.wait_for_disk:g}: give seconds, 0 or more")
    if args.all:
        variants = matrix.debian_based
        if getattr(args, "platform", "linux/amd64") != "linux/amd64":
            variants = [v for v in variants if args.platform in v.platforms]
    elif args.ids:
        variants = matrix.select(args.ids)
    else:
        raise UsageError(f"name the variants to build (or --all); valid ids: {', '.join(matrix.ids)}")
    ca_cert = None if args.no_ca_cert else build.default_ca_cert(args.ca_cert)
    if ca_cert:
        build.read_ca_cert(ca_cert)  # fail before touching Docker
    flag = "--jupyter-only" if args.jupyter_only else "--jupyter"
    if (args.jupyter or args.jupyter_only) and not [v for v in variants if v in matrix.with_jupyter()]:
        raise UsageError(f"{flag}: none of {', '.join(v.id for v in variants)} has a JupyterLab flavour "
                         f"(those that do: {', '.join(v.id for v in matrix.with_jupyter())})")
    tag = getattr(args, "tag", None)
    if tag and (len(variants) != 1 or args.jupyter or args.jupyter_only):
        raise UsageError(f"--tag {tag}: name one variant, without --jupyter (it tags that one image)")
    if tag and ":" not in tag.rsplit("/", 1)[-1]:
        raise UsageError(f"--tag {tag}: give NAME:TAG, e.g. kerasenv:{variants[0].id}-rebuilt")
    client = docker_client.client()
    options = dict(base_image=args.base_image or os.environ.get("BASE_IMAGE"), ca_cert=ca_cert, no_cache=args.no_cache,
                   debian_state=args.debian_updates, network=args.network, builder=getattr(args, "builder", None))
    if getattr(args, "platform", "linux/amd64") != "linux/amd64":
        if args.jupyter or args.jupyter_only:
            raise UsageError("the arm64 images have no JupyterLab flavour: drop --jupyter")
        options["platform"] = args.platform
    results = []
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    platform = options.get("platform", "linux/amd64")
    for v in variants:
        built = []  # (tag, result)
        if not args.jupyter_only:
            ref = tag or v.platform_ref(platform)
            disk.ensure_room(client, ref, int(disk.build_need_bytes(v, platform) * disk.store_factor(client)),
                             args.wait_for_disk, say)
            built.append((ref, build.build(client, matrix, v, tag=tag, **options)))
        if (args.jupyter or args.jupyter_only) and v in matrix.with_jupyter():
            need = int(disk.build_need_bytes(v, platform, jupyter_added_mb=matrix.jupyter.added_size_budget_mb)
                       * disk.store_factor(client))
            disk.ensure_room(client, v.jupyter_ref, need, args.wait_for_disk, say)
            built.append((v.jupyter_ref, build.build(client, matrix, v, jupyter=True, **options)))
        for _, result in built if args.drop_build_cache else ():
            build.drop_build_cache(client, result, lambda line: print(line, file=sys.stderr))
        results += built
    for ref, r in results:
        print(f"{ref}\t{r.size_bytes / 1e9:.2f} GB\t{r.seconds:.0f} s")
    return 0


def _cmd_drop_build_cache(args, matrix: Matrix) -> int:
    from . import build
    from ..engine import docker_client

    client = docker_client.client()
    for v in matrix.select(args.ids):
        build.drop_recorded_build_cache(client, v, lambda line: print(line, file=sys.stderr))
    return 0


def _cmd_base_offline(args, matrix: Matrix) -> int:
    from . import base_offline
    from ..engine import docker_client

    arch = getattr(args, "platform", "linux/amd64").split("/")[1]
    bases = matrix.debian_bases  # name -> suite, as the builds look them up
    if arch != "amd64":
        from .build import arm64_base
        bases = {arm64_base(v.base_image): v.debian_suite for v in matrix.variants if v.arm64 and v.debian_suite}
    if args.suite:
        name = args.tag or next((b for b, s in bases.items() if s == args.suite),
                                base_offline.default_tag(args.suite, arch))
        bases = {name: args.suite}
    elif args.tag:
        if len(bases) != 1:
            raise UsageError(f"--tag names one image, and the matrix builds on {len(bases)} Debian bases "
                             f"({', '.join(bases)}): pass --suite SUITE with it")
        bases = {args.tag: next(iter(bases.values()))}
    if not bases:
        raise UsageError(f"{matrix.path} names no Debian base image: pass --suite SUITE")
    client = docker_client.client()
    for name, suite in bases.items():
        base_offline.make(client, suite=suite, tag=name, mirror=args.mirror, force=args.force,
                          say=lambda m: print(m, file=sys.stderr), arch=arch)
    return 0


def _cmd_sbom(args, matrix: Matrix) -> int:
    from . import sbom
    from ..engine import docker_client

    v = matrix.get(args.id)
    bom = sbom.generate(docker_client.client(), v)
    if str(args.output) == "-":
        print(json.dumps(bom, indent=2))
        return 0
    path = args.output or Path(f"sbom-{v.id}.cdx.json")
    sbom.write(bom, path)
    print(f"wrote {path}: {len(bom.get('components', []))} components", file=sys.stderr)
    return 0


def _cmd_kernel_targets(args, matrix: Matrix) -> int:
    from . import kernel_targets
    from ..engine import docker_client

    v = matrix.get(args.id)
    if v.family != "cuda":
        kernel_targets.probe(None, matrix, v)  # the one-line refusal, before Docker is asked
    arch = getattr(args, "platform", "linux/amd64").split("/")[1]
    parsed = kernel_targets.probe(docker_client.client(), matrix, v, f"linux/{arch}")
    recorded = kernel_targets.to_record(v, parsed)
    print(kernel_targets.format_table(recorded, parsed.get("seconds")))
    if args.write:
        path = kernel_targets.write(matrix, v, recorded, arch)
        print(f"wrote {path}; `make generate` puts it into the labels and the README table")
        return 0
    differs = kernel_targets.drift(matrix, v, recorded, arch)
    if differs:
        flag = "" if arch == "amd64" else f" --platform linux/{arch}"
        raise KerasenvError(f"{differs}: re-record with `kerasenv kernel-targets {v.id} --write{flag}`, "
                            "then `make generate`")
    print(f"matches {kernel_targets.record.record_path(matrix.path.parent, v.id, arch)}")
    return 0


def _cmd_clean(args, matrix: Matrix) -> int:
    from . import clean
    from ..engine import docker_client

    done = clean.clean(docker_client.client(), matrix, images=args.images, say=print)
    print(f"clean: {done.containers} container(s), {done.reclaimed_bytes / 1e6:.0f} MB reclaimed")
    return 0
