"""The bench run (kerasenv_image.bench.main, `python -m kerasenv_image.bench`): what can be
checked without TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kerasenv_image.bench
from kerasenv_image.bench import main


def test_no_bench_module_imports_tensorflow_at_module_level():
    for path in Path(kerasenv_image.bench.__file__).parent.glob("*.py"):
        top = [line for line in path.read_text().splitlines() if line.startswith(("import ", "from "))]
        assert not any("tensorflow" in line or "keras" in line or "numpy" in line for line in top), path.name


@pytest.mark.parametrize("argv", [["--models", "resnet"], ["--batch-sizes", "x"], ["--jit", "maybe"],
                                  ["--precision", "int8"], ["--min-steps", "1"], ["--time-box", "-1"]])
def test_bad_arguments_exit_2_before_tensorflow_is_imported(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_python_m_kerasenv_image_bench_is_the_bench():
    proc = subprocess.run([sys.executable, "-m", "kerasenv_image.bench", "--models", "resnet"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "python -m kerasenv_image.bench: error: models 'resnet'" in proc.stderr
