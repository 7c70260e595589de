"""Docker takes the exact arguments kerasenv's ROCm path produces for a recorded AMD host, and a
non-root container started with them holds the host's render and kfd GIDs, unconfined by seccomp.

No AMD GPU here (nor on CI): the host is tests/fixtures/amd-hosts/ubuntu-render-993, a simulated
shape (render GID 993 of ROCm/ROCm-docker#116). Its /dev/kfd and render nodes do not exist on
this machine, so each node's host side is /dev/null (amd_devices.with_sources: the same
`Node.source` the real path reads), and the container side stays /dev/kfd, /dev/dri/...: Docker
validates and creates every `--device`, `--group-add` and `--security-opt` exactly as on the AMD
host. What it cannot show is HIP opening a real GPU (docs/using/amd-gpus.md).
Seconds: debian:bookworm-slim (`make test-prereqs` provides it), no build, no kerasenv image.
"""

from __future__ import annotations

from kerasenv.engine import amd_devices, gpu_request
from kerasenv.run import runner

from .conftest import REPO

HOST = REPO / "tests" / "fixtures" / "amd-hosts" / "ubuntu-render-993" / "host.json"
IMAGE = "debian:bookworm-slim"


def test_a_non_root_rocm_container_gets_the_render_gid_by_number_and_no_seccomp(container):
    recorded = amd_devices.load_record(HOST)
    args = runner.gpu_and_groups(gpu_request.resolve("all", "rocm", amd=amd_devices.with_sources(recorded, "/dev/null")))
    # What `kerasenv smoke tf2.17-rocm6.3` sends on that host, but the nodes' host side.
    assert args == {"devices": ["/dev/null:/dev/kfd:rwm", "/dev/null:/dev/dri/card0:rwm",
                                "/dev/null:/dev/dri/renderD128:rwm"],
                    "group_add": ["44", "993", "0"], "security_opt": ["seccomp=unconfined"]}
    script = "id -u; id -G; grep '^Seccomp:' /proc/self/status; for d in /dev/kfd /dev/dri/card0 " \
             "/dev/dri/renderD128; do test -c $d && echo device $d; done"
    code, out, err = container(IMAGE).run(["sh", "-c", script], user="1000:1000", timeout=60, **args)
    assert code == 0, err
    uid, groups, seccomp, *devices = out.splitlines()
    assert uid == "1000"
    assert {"993", "44", "0"} <= set(groups.split())  # render (kfd, renderD128), video (card0), the venv's 0
    assert seccomp.split() == ["Seccomp:", "0"]  # 0: no seccomp filter
    assert devices == ["device /dev/kfd", "device /dev/dri/card0", "device /dev/dri/renderD128"]
