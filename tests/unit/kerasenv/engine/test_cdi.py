"""The NVIDIA CDI devices a host defines: read from its spec files (a constructed /etc/cdi,
tests/fixtures/host-shapes/README.md) or from `nvidia-ctk cdi list`."""

from __future__ import annotations

from kerasenv.engine import cdi

from ...conftest import REPO

SHAPES = REPO / "tests" / "fixtures" / "host-shapes"


def test_the_specs_names_are_read_fully_qualified():
    found = cdi.from_specs(SHAPES / "cdi-nvidia")
    assert found.names == ("nvidia.com/gpu=0", "nvidia.com/gpu=GPU-4101de38-535a-4255-ac14-a63e072d7a10",
                           "nvidia.com/gpu=all")
    assert found.specs == ("/etc/cdi/nvidia.yaml",)
    assert found.qualified("all") == "nvidia.com/gpu=all" and found.qualified("1") is None


def test_no_spec_dir_means_no_devices_and_a_broken_spec_is_reported(tmp_path):
    assert not cdi.from_specs(tmp_path).present
    (tmp_path / "etc/cdi").mkdir(parents=True)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "etc/cdi/amd.json").write_text('{"kind": "amd.com/gpu", "devices": [{"name": "0"}]}')
    found = cdi.from_specs(tmp_path)
    assert not found.present and found.errors == ("/etc/cdi/nvidia.yaml: unreadable (ParserError)",)


def test_ctk_list_lines_are_the_device_names_and_its_log_lines_are_not():
    text = ('INFO[0000] Found 3 CDI devices\nnvidia.com/gpu=0\nnvidia.com/gpu=0:1\n'
            'nvidia.com/gpu=all\n')
    assert cdi.parse_ctk_list(text) == ["nvidia.com/gpu=0", "nvidia.com/gpu=0:1", "nvidia.com/gpu=all"]


def test_the_spec_folders_are_the_users_then_the_engines_then_cdis_defaults(monkeypatch):
    from kerasenv.engine import engine_facts

    monkeypatch.delenv(cdi.DIRS_ENV, raising=False)
    podman = engine_facts.Engine("podman", "5.8.6", cdi_reported=True)  # its /info: CDISpecDirs null
    docker = engine_facts.Engine("docker", "28.3.3", cdi_spec_dirs=("/srv/cdi",), cdi_reported=True)
    assert cdi.spec_dirs(None) == cdi.spec_dirs(podman) == ("/etc/cdi", "/var/run/cdi")
    assert cdi.spec_dirs(docker) == ("/srv/cdi",)
    monkeypatch.setenv(cdi.DIRS_ENV, "/tmp/a::/tmp/b")
    assert cdi.spec_dirs(docker) == ("/tmp/a", "/tmp/b")


def test_specs_in_other_folders_are_read_and_ctk_is_not_asked_for_them(tmp_path):
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi/nvidia.json").write_text('{"kind": "nvidia.com/gpu", "devices": [{"name": "all"}]}')
    asked = []
    found = cdi.scan("/", runner=lambda *a, **k: asked.append(a), dirs=(str(tmp_path / "cdi"),))
    assert found.names == ("nvidia.com/gpu=all",) and found.specs == (f"{tmp_path}/cdi/nvidia.json",)
    assert found.where() == str(tmp_path / "cdi") and asked == []
