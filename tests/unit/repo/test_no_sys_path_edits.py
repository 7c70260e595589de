"""No Python file of the tree edits sys.path as a statement (issue 45): in-image code is imported
from the image's installed package (kerasenv-image.pth in its venv), host code from the kerasenv
package, tests through pytest's rootdir. Generated scripts that must set their own path (the
GPU-host check's run.py, the SBOM runner) are strings in the code that writes them, not statements."""

from __future__ import annotations

import ast

from ..conftest import REPO

SKIP = {".venv", ".git", "node_modules", ".sbom-tool", "build", ".bench", "runs"}


def _python_files():
    for path in REPO.rglob("*.py"):
        if not SKIP & set(path.relative_to(REPO).parts):
            yield path


def _edits_sys_path(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value  # sys.path.insert(...), sys.path.append(...), .extend, .remove
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value if isinstance(t, ast.Subscript) else t for t in targets), None)
        if (isinstance(target, ast.Attribute) and target.attr == "path" and isinstance(target.value, ast.Name)
                and target.value.id == "sys"):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_checker_sees_each_form_of_edit():
    code = "import sys\nsys.path.insert(0, 'x')\nsys.path.append('y')\nsys.path[:0] = ['z']\nsys.path += ['w']\n"
    assert _edits_sys_path(ast.parse(code)) == [2, 3, 4, 5]
    assert _edits_sys_path(ast.parse("RUN = '''sys.path.insert(0, HERE)'''\nfor p in sys.path: pass\n")) == []


def test_no_python_file_edits_sys_path():
    found = {str(p.relative_to(REPO)): lines for p in _python_files()
             if (lines := _edits_sys_path(ast.parse(p.read_text(encoding="utf-8"), str(p))))}
    assert found == {}
