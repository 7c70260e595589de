"""The README variant table and its replacement between the markers."""

from __future__ import annotations

from kerasenv import table

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
        assert line.count(" | ") == 7


def test_every_row_says_what_ci_checks_and_rocm_says_it_is_not_built(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    for v in real_matrix.variants:
        if v.family == "rocm":
            assert "**not built here**" in body[v.id] and "Docker Hub" in body[v.id]
        else:
            assert "built; default command offline; acceptance suite; user script" in body[v.id]
            assert ("TensorFlow's GPU-library check" in body[v.id]) is (v.family == "cuda")


def test_rows_show_driver_floors(real_matrix):
    body = dict(zip(real_matrix.ids, rows(table.markdown(real_matrix))))
    for v in real_matrix.variants:
        if v.family == "cuda":
            assert f"{v.min_driver} (PTX JIT: {v.min_driver_ptx})" in body[v.id]
    assert "| none |" in body[real_matrix.default_cpu]
    assert "(default GPU)" in body[real_matrix.default_gpu]
    assert "(default ROCm)" in body[real_matrix.default_rocm]
    assert "525.60.13 (PTX JIT: 555.42.06)" in body["tf2.21-cuda12.5"]


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
