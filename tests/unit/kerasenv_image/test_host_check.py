"""The GPU-host check's runner (kerasenv_image.host_check): which wheels it unpacks, the
nvidia-smi captures, the summary and exit status, with fake backends."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

from kerasenv_image import host_check

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def test_keras_always_and_a_dependency_only_when_missing_and_for_this_python():
    wheels = ["/w/keras-3.15.1-py3-none-any.whl", "/w/namex-0.1.0-py3-none-any.whl",
              "/w/rich-15.0.0-py3-none-any.whl", f"/w/optree-0.20.0-{TAG}-{TAG}-manylinux_2_28_x86_64.whl",
              "/w/h5py-3.16.0-cp399-cp399-manylinux_2_28_x86_64.whl"]
    present = {"rich"}
    chosen = host_check.wheels_to_unpack(wheels, find=lambda m: object() if m in present else None)
    assert [c.split("/")[-1].split("-")[0] for c in chosen] == ["keras", "namex", "optree"]


def test_a_wheel_is_unpacked_as_its_site_packages_layout(tmp_path):
    whl = tmp_path / "namex-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("namex/__init__.py", "X = 1\n")
        z.writestr("namex/_x.so", "")
    host_check.unpack([str(whl)], str(tmp_path / "site"))
    assert (tmp_path / "site" / "namex" / "__init__.py").read_text() == "X = 1\n"
    assert (tmp_path / "site" / "namex" / "_x.so").stat().st_mode & 0o111


def test_nvidia_smi_outputs_are_written_verbatim_under_the_fixture_names(tmp_path, monkeypatch):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    seen = []

    def runner(cmd, **kwargs):
        seen.append(cmd[1:])
        if cmd[1:] == ["-q", "-x"]:
            return subprocess.CompletedProcess(cmd, 9, "", "Failed to initialize NVML\n")
        return subprocess.CompletedProcess(cmd, 0, f"out of {' '.join(cmd[1:])}\n", "")

    status = host_check.capture_nvidia_smi(str(tmp_path), runner=runner)
    assert ["--query-gpu=index,name,driver_version,memory.total,compute_cap", "--format=csv"] in seen
    assert (tmp_path / "list.txt").read_text() == "out of -L\n"
    assert status["nvidia-smi-q.xml"]["exit"] == 9
    assert (tmp_path / "nvidia-smi-q.xml.err").read_text() == "Failed to initialize NVML\n"
    assert not (tmp_path / "list.txt.err").exists()


def test_no_nvidia_smi_is_recorded_not_faked(tmp_path, monkeypatch):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: None)
    status = host_check.capture_nvidia_smi(str(tmp_path))
    assert all(s["exit"] is None for s in status.values()) and list(tmp_path.iterdir()) == []


def test_summary_and_exit_status_per_backend(tmp_path, monkeypatch):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: None)
    monkeypatch.setattr(host_check, "installed_backends", lambda: ["jax", "torch"])
    results = {"jax": "PASS", "torch": "FAIL"}
    monkeypatch.setattr(host_check, "check_backend", lambda b, args, out, env: {
        "verdict": results[b], "seconds": 1.0, "probe": {"exit": 0}, "smoke": {"exit": 0 if b == "jax" else 3}})
    pack = tmp_path / "pack"
    (pack / "wheels").mkdir(parents=True)
    code = host_check.main(["--out", str(tmp_path / "out"), "--no-require-gpu", "--archive"], pack=str(pack))
    assert code == 1
    (report,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["require_gpu"] is False and summary["exit"] == 1
    assert {b: r["verdict"] for b, r in summary["backends"].items()} == results
    assert (tmp_path / "out" / f"{report.name}.tar.gz").is_file()
    monkeypatch.setattr(host_check, "installed_backends", lambda: [])
    assert host_check.main(["--out", str(tmp_path / "out2")], pack=str(pack)) == 2
