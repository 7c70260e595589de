"""The README variant table and its replacement between the markers."""

from __future__ import annotations

from kerasenv.matrix import table

INTRO = "# kerasenv\n\nIntro text.\n\n"
OUTRO = "\n\n## Usage\n\nkeep | this | table-like | line\n"


def readme(body: str) -> str:
    return f"{INTRO}{table.BEGIN}\n{body}{table.END}{OUTRO}"


def rows(markdown: str) -> list[str]:
    return markdown.splitlines()[2:]  # after the header and the --- line


def test_one_row_per_variant_in_matrix_order(real_matrix):
    body = rows(table.markdown(real_matrix))
    assert len(body) == len(real_matrix.variants)
    for line, v in zip(body, real_matrix.variants):
        assert line.startswith(f"| `{v.id}`")
        assert line.count(" | ") == 9
        assert f" | {'amd64, arm64' if v.arm64 else 'amd64'} | " in line


def test_rows_show_the_gpu_code_read_from_the_binaries(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    assert "| SASS sm_60, sm_70, sm_80, sm_89, sm_90; PTX compute_90 |" in body["tf2.21-cuda12.9"]
    for v in real_matrix.variants:
        if v.family == "cuda" and v.kernel_targets is None:
            assert f"`kerasenv kernel-targets {v.id} --write`" in body[v.id]


def test_every_row_says_what_ci_checks_and_rocm_says_it_is_not_built(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    for v in real_matrix.variants:
        if v.family == "rocm":
            assert "**not built here**" in body[v.id] and "Docker Hub" in body[v.id]
        else:
            assert "built; default command offline; acceptance suite; user script" in body[v.id]
            assert (f"{v.framework_name}'s GPU-library check" in body[v.id]) is (v.family == "cuda")


def test_rows_show_driver_floors(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    for v in real_matrix.variants:
        if v.family == "cuda" and v.backend == "torch":
            assert f"{v.min_driver} (no PTX to JIT)" in body[v.id]
        elif v.family == "cuda":
            assert f"{v.min_driver} (PTX JIT: {v.min_driver_ptx})" in body[v.id]
    assert "| none |" in body[real_matrix.default_cpu]
    assert "(default GPU)" in body[real_matrix.default_gpu]
    assert "(default ROCm)" in body[real_matrix.default_rocm]
    assert "525.60.13 (PTX JIT: 555.42.06); CUDA 12.9 wheels' own driver: 575.57.08" in body["tf2.21-cuda12.9"]
    assert "525.60.13 (PTX JIT: 555.42.06); Windows (WSL2): 528.33 (PTX JIT: 555.85) |" in body["tf2.20-cuda12.5"]
    # a WSL2 host's driver is Windows's: NVIDIA's Windows column, the same derivation
    assert "Windows (WSL2): 528.33 (PTX JIT: 576.57)" in body["jax0.12-cuda12.9"]
    assert "Windows (WSL2): 580.88 (reported, not on an NVIDIA page)" in body["torch2.15-cuda13.2"]


def test_rows_show_where_each_cuda_stack_comes_from(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    gpu = real_matrix.get("tf2.21-cuda12.9")
    assert f"GPU-verified override: {gpu.gpu_evidence.gpu}, 2026-07-16 ([source]({gpu.gpu_evidence.source}))" \
        in body[gpu.id]
    for v in real_matrix.variants:
        if v.family == "cuda" and v.backend != "tensorflow":
            assert f"{v.framework_name}'s own GPU CI: {v.gpu_evidence.gpu}" in body[v.id]
        elif v.family == "cuda" and not v.is_override:
            assert "[TF's tested configuration](https://www.tensorflow.org/install/source#gpu)" in body[v.id]
        elif v.family != "cuda":
            assert "tested configuration" not in body[v.id] and "override" not in body[v.id]


def test_replace_in_readme_changes_only_the_marked_block(real_matrix):
    out = table.replace_in_readme(readme("| old | table |\n"), real_matrix)
    assert out == readme(table.markdown(real_matrix))
    assert "| old | table |" not in out


def test_replace_in_readme_is_idempotent(real_matrix):
    once = table.replace_in_readme(readme(""), real_matrix)
    assert table.replace_in_readme(once, real_matrix) == once


def test_readme_without_both_markers_in_order_is_left_alone(real_matrix):
    for text in (INTRO + OUTRO, INTRO + table.BEGIN + OUTRO, f"{INTRO}{table.END}\n{table.BEGIN}{OUTRO}"):
        assert table.replace_in_readme(text, real_matrix) == text
