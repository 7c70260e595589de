"""The pull benchmark's parts that need no engine: its options, reading the smoke's output,
the medians and the zstd/gzip ratio, and the report made of the results."""

from __future__ import annotations

import pytest

from kerasenv.bench import pull, pull_report
from kerasenv.errors import UsageError

SMOKE_OK = """[smoke] importing TensorFlow
[smoke] OK (exit 0)
[smoke]   TensorFlow 2.21.0 / Keras 3.15.1 / Python 3.11.2 (tf2.21-cpu)
[smoke]   loss 1.408 -> 0.010, accuracy 1.000, 1278 samples/s, first step after 3.0 s
"""


def test_compressions_are_a_list_of_gzip_and_zstd():
    assert pull.parse_compressions("gzip,zstd") == ["gzip", "zstd"]
    assert pull.parse_compressions(" zstd ") == ["zstd"]
    for bad in ("", "gzip,gzip", "xz", "both"):
        with pytest.raises(UsageError, match="a list of gzip and zstd"):
            pull.parse_compressions(bad)


def test_the_smokes_first_step_and_verdict_are_read_from_its_output():
    assert pull.smoke_outcome(SMOKE_OK) == (3.0, "OK")
    assert pull.smoke_outcome("[smoke] importing TensorFlow\n") == (None, "no verdict")


class FakeImage:
    # As on the containerd image store: Size counts the compressed content (moby#53398), the
    # history the unpacked layers, which are what the report calls the image's size.
    id = "sha256:abc"
    attrs = {"Size": 3_650_000_000, "RootFS": {"Layers": ["sha256:base", "sha256:venv"]}}

    def history(self):
        return [{"CreatedBy": "COPY /opt/venv /opt/venv # buildkit", "Size": 6_660_000_000},
                {"CreatedBy": "LABEL a=b", "Size": 0}, {"CreatedBy": "", "Size": 80_000_000}]


def run(c, r, pull_s):
    return pull.PullRun(c, r, pull_s, 9.0, 0.8, "OK", 6)


def test_medians_and_the_ratio_of_zstd_to_gzip(real_matrix, monkeypatch):
    monkeypatch.setattr(pull, "engine_name", lambda: "containerd 1.6.20 (test)")
    images = {"gzip": {"ref": "r:g", "push_s": 139.0, "compressed_bytes": 3_650_000_000, "layers": 6,
                       "largest_layer_bytes": 2_500_000_000, "media_types": []},
              "zstd": {"ref": "r:z", "push_s": 102.0, "compressed_bytes": 3_100_000_000, "layers": 6,
                       "largest_layer_bytes": 2_100_000_000, "media_types": []}}
    runs = [run("gzip", 1, 90.0), run("zstd", 1, 50.0), run("gzip", 2, 92.0), run("zstd", 2, 56.0),
            run("gzip", 3, 100.0), run("zstd", 3, 54.0)]
    v = real_matrix.get("tf2.21-cuda12.9")
    doc = pull.document(v, v.image_ref, FakeImage(), images, runs, 3)
    assert doc["median"]["gzip"]["pull_s"] == 92.0 and doc["median"]["zstd"]["pull_s"] == 54.0
    assert doc["zstd_vs_gzip"] == {"pull_s": round(54 / 92, 3), "compressed_bytes": round(3.1 / 3.65, 3)}
    text = pull_report.markdown([doc], charted=False)
    assert "| `tf2.21-cuda12.9` | 6.74 GB | zstd (level 3) | 3.10 GB | 6 (2.10 GB) | 102 s | 54.0 s |" in text
    assert f"cold pull **{54 / 92:.2f}x**" in text
    assert pull.summary_lines(doc)[-1].startswith(f"zstd / gzip: pull {round(54 / 92, 3)}x")


def test_the_report_says_how_to_measure_when_there_is_nothing(tmp_path):
    written = pull_report.generate(tmp_path)
    assert "No results yet" in written["pull"].read_text() and "pull.png" not in written
