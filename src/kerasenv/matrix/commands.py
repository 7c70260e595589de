"""`kerasenv list`: the variants of the matrix, as text, the README table, JSON or ids.

(`kerasenv matrix`, the CI's view of the matrix, is publish/commands.py's: its rows carry
each variant's full tag, a fact of publish/tags.)
"""

from __future__ import annotations

import json
import sys

from . import table
from .schema import Matrix


def register(subparsers) -> None:
    s = subparsers.add_parser("list", help="list the variants of the matrix")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="the README variant table")
    fmt.add_argument("--json", action="store_true", help="one object per variant")
    fmt.add_argument("--ids", action="store_true", help="ids only, one a line")
    s.add_argument("--debian-based", action="store_true",
                   help="only the variants built FROM Debian (all but ROCm): what `build --all` and CI build")
    s.set_defaults(handler=_cmd_list)


def _cmd_list(args, matrix: Matrix) -> int:
    if args.markdown:
        sys.stdout.write(table.markdown(matrix))
    elif args.ids:
        print("\n".join(v.id for v in (matrix.debian_based if args.debian_based else matrix.variants)))
    elif args.json:
        rows = []
        for v in matrix.variants:
            row = {k: val for k, val in vars(v).items()
                   if val is not None and k not in ("gpu_evidence", "recorded_kernels", "keras_tools", "arm64",
                                                    "recorded_kernels_arm64")}
            arm64 = v.kernels_for("arm64")
            row.update(platforms=list(v.platforms),
                       arm64=None if not v.arm64 else {
                           "image": v.platform_ref("linux/arm64"),
                           "gpu_evidence": vars(v.arm64.gpu_evidence) if v.arm64.gpu_evidence else None,
                           "evidence_gap": v.arm64.evidence_gap, "size_budget_mb": v.arm64.size_budget_mb,
                           "kernels_sass": list(arm64.sass) if arm64 else None,
                           "kernels_ptx": list(arm64.ptx) if arm64 else None})
            row.update(image=v.image_ref, framework=v.framework_package, framework_version=v.framework_version,
                       min_driver=v.min_driver, min_driver_ptx_jit=v.min_driver_ptx,
                       cuda_wheels_driver=v.min_driver_toolkit,
                       cuda_compute_capabilities=list(v.compute_capabilities),
                       kernels_sass=list(v.kernel_targets.sass) if v.kernel_targets else None,
                       kernels_ptx=list(v.kernel_targets.ptx) if v.kernel_targets else None,
                       cuda_stack_provenance=vars(v.provenance) if v.provenance else None,
                       # [keras_tools]: what the lock adds, and each of Keras's tools the image lacks, with why
                       keras_tools={"requirements": v.keras_tools.requirements(v),
                                    "not_offered": {k: why for k, why in v.keras_tools.offers(v).items() if why}}
                       if v.keras_tools else None)
            rows.append({k: val for k, val in row.items() if val not in (None, [])})
        print(json.dumps(rows, indent=2))
    else:
        for v in matrix.variants:
            stack = {"cuda": f"CUDA {v.cuda} / cuDNN {v.cudnn}", "rocm": f"ROCm {v.rocm}"}.get(v.family, "CPU")
            print(f"{v.id:<19} {v.framework_label:<15} Keras {v.keras:<7} Python {v.python:<5} {stack}")
            if v.provenance:
                print(f"{'':<18} stack: {v.provenance.one_line()}")
            if v.family == "cuda":
                print(f"{'':<18} GPU code: {table.kernels_cell(v)}")
    return 0
