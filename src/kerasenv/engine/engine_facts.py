"""Which container engine answers on this Docker API socket, and what it does with a GPU request.

Five engine modes hand GPUs to a container in different ways, and the same `--gpus all`
means something else in each (gpu_request.resolve turns it into what this engine takes):

- Docker with NVIDIA's runtime hook: `DeviceRequest(count=-1, capabilities=[["gpu"]])`, what
  `docker run --gpus all` sends (moby daemon/nvidia_linux.go registers the `nvidia` driver
  when `nvidia-container-runtime-hook` is on dockerd's PATH).
- Docker with CDI: `DeviceRequest(driver="cdi", device_ids=["nvidia.com/gpu=all"])`. CDI is
  opt-in from Docker 25 (`"features": {"cdi": true}`) and on by default from 28.2
  (moby#49963); the daemon's /info lists `CDISpecDirs` then, and "an empty list indicates
  that CDI device injection is disabled" (Engine API, SystemInfo). NVIDIA recommends it
  (`nvidia-ctk cdi generate`), and a host with a CDI spec and no hook answers `--gpus` with
  "could not select device driver". (Newer Docker also routes `--gpus` through CDI when NVIDIA's
  nvidia-cdi-hook is installed: moby 86f122a, "Map nvidia --gpus request to CDI device
  requests"; sending the CDI request ourselves works on those and on the older ones.)
- ROCm: device nodes, the host's GIDs and seccomp unconfined (engine/amd_devices).
- Podman behind DOCKER_HOST: its /version names "Podman Engine" among the Components. Podman
  4.x's compat API accepts a DeviceRequest with HTTP 201 and gives the container no GPU
  (containers/podman#22645); from 5.4 it honours DeviceRequests whose Driver is "cdi"
  (containers/podman#19338, fixed by PR #25171), and still drops the `--gpus`-style one (seen on
  5.8.6: tests/integration/test_podman5.py).
- Rootless Docker: `name=rootless` in /info's SecurityOptions (rootless Podman: `"Rootless":
  true`). The runtime hook then fails
  unless the toolkit has `no-cgroups = true` (NVIDIA/nvidia-container-toolkit#139,
  moby#38729); CDI works without it.

- The image store (Docker): a graph driver (`overlay2`, what 20.10 and upgraded installs use)
  or the containerd snapshotter (`features.containerd-snapshotter`, the default of fresh Docker
  29 installs): /info says `Driver: overlayfs` and `DriverStatus: [["driver-type",
  "io.containerd.snapshotter.v1"]]` then. It changes what `docker image inspect` means: the Id
  is the manifest (or index) digest, not the config digest, and `Size` counts the compressed
  content on 29.0-29.7 (moby#53398, moby#53426), so kerasenv reads layer sizes from the history
  (images/sizes.py); one tag can hold several platforms (`docker run --platform`).

`parse` is pure (unit-tested against recorded /version and /info answers in
tests/fixtures/engines/); `ask` reads them from a docker SDK client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .docker_client import engine_version

# Docker enables CDI by default from 28.2.0 (moby#49963); before, only with features.cdi.
DOCKER_CDI_DEFAULT = (28, 2)
# Podman honours CDI DeviceRequests through its Docker-compatible API from 5.4.0
# (containers/podman#19338, PR #25171; #22645 is the report of the silent drop, still open).
PODMAN_CDI_REQUESTS = (5, 4)
# /info DriverStatus's driver-type row on the containerd image store (moby daemon/containerd).
CONTAINERD_SNAPSHOTTER = "io.containerd.snapshotter.v1"


@dataclass(frozen=True)
class Engine:
    """What answers on the Docker API socket (a docker SDK client's daemon)."""

    product: str  # "docker" | "podman"
    version: str | None = None  # the engine's own version (Podman's, not the API's)
    api_version: str | None = None
    rootless: bool = False
    cgroup_version: str | None = None  # "1" | "2"
    cdi_spec_dirs: tuple[str, ...] = ()  # Docker >= 27 (/info CDISpecDirs): empty = CDI off
    cdi_reported: bool = False  # /info has a CDISpecDirs field at all (Docker >= 27)
    discovered_cdi: tuple[str, ...] = ()  # /info DiscoveredDevices of source "cdi" (newer daemons)
    runtimes: tuple[str, ...] = ()
    security_options: tuple[str, ...] = field(default=())
    storage_driver: str | None = None  # /info Driver: "overlay2", "overlayfs" (containerd), "vfs"
    containerd_store: bool = False  # the containerd image store (snapshotter), not a graph driver

    @property
    def image_store(self) -> str | None:
        """ "containerd (overlayfs snapshotter)" or "overlay2 (graph driver)"; None: not said."""
        if self.is_podman or not self.storage_driver:
            return None
        if self.containerd_store:
            return f"containerd ({self.storage_driver} snapshotter)"
        return f"{self.storage_driver} (graph driver)"

    @property
    def multi_platform_tags(self) -> bool:
        """One local tag can hold several platforms (the containerd store); a graph driver keeps
        one image per tag, so kerasenv tags arm64 images `<id>-arm64`."""
        return self.containerd_store

    @property
    def is_podman(self) -> bool:
        return self.product == "podman"

    @property
    def cdi_enabled(self) -> bool:
        """Whether this engine applies a CDI DeviceRequest (`driver: cdi`)."""
        version = engine_version(self.version or "")
        if self.is_podman:
            return bool(version) and version >= PODMAN_CDI_REQUESTS
        if self.cdi_reported:
            return bool(self.cdi_spec_dirs)
        # A daemon that does not report CDISpecDirs predates it (< 27): CDI off, bar the
        # opt-in of 25-26 (features.cdi), which this cannot see.
        return bool(version) and version >= DOCKER_CDI_DEFAULT

    @property
    def drops_gpu_requests(self) -> bool:
        """A `--gpus`-style DeviceRequest is accepted and silently ignored (Podman)."""
        return self.is_podman

    def describe(self) -> str:
        name = "Podman" if self.is_podman else "Docker"
        parts = [f"{name} {self.version or '(version unknown)'}"]
        if self.is_podman:
            parts.append("behind the Docker API")
        parts.append("rootless" if self.rootless else "rootful")
        if self.cgroup_version:
            parts.append(f"cgroup v{self.cgroup_version}")
        cdi = ("CDI on (" + ", ".join(self.cdi_spec_dirs) + ")" if self.cdi_spec_dirs else "CDI on") \
            if self.cdi_enabled else "CDI off"
        parts.append(cdi)
        if self.image_store:
            parts.append(f"image store {self.image_store}")
        return ", ".join(parts)


def parse(version: dict, info: dict) -> Engine:
    """An Engine from the daemon's /version and /info answers (as the docker SDK returns them)."""
    components = version.get("Components") or []
    names = " ".join(str(c.get("Name", "")) for c in components)
    podman = next((c for c in components if "podman" in str(c.get("Name", "")).lower()), None)
    security = tuple(str(s) for s in info.get("SecurityOptions") or [])
    # Docker: `name=rootless` among the security options (Docker's rootless docs); Podman's
    # compat /info says `"Rootless": true` instead (its SecurityOptions do not; seen on 4.3.1).
    rootless = any("name=rootless" in s for s in security) or info.get("Rootless") is True
    if podman is not None or "podman" in names.lower():
        product, engine_version = "podman", (podman or {}).get("Version") or version.get("Version")
    else:
        product, engine_version = "docker", version.get("Version") or info.get("ServerVersion")
    discovered = tuple(str(d.get("ID")) for d in info.get("DiscoveredDevices") or []
                       if str(d.get("Source", "")).lower() == "cdi" and d.get("ID"))
    driver_status = {str(row[0]): str(row[1]) for row in info.get("DriverStatus") or [] if len(row) == 2}
    return Engine(
        storage_driver=info.get("Driver") or None,
        containerd_store=driver_status.get("driver-type") == CONTAINERD_SNAPSHOTTER,
        product=product, version=engine_version, api_version=version.get("ApiVersion"),
        rootless=rootless, cgroup_version=str(info["CgroupVersion"]) if info.get("CgroupVersion") else None,
        cdi_spec_dirs=tuple(info.get("CDISpecDirs") or ()), cdi_reported="CDISpecDirs" in info,
        discovered_cdi=discovered, runtimes=tuple(sorted((info.get("Runtimes") or {}).keys())),
        security_options=security)


def ask(client) -> Engine:
    """The Engine behind a docker SDK client (two API calls)."""
    return parse(client.version(), client.info())
