"""Options of the whole test tree (pytest reads addoption hooks only from the rootdir's conftest)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--lane-image", metavar="VARIANT",
        help="run only the integration tests marked lane_image(VARIANT): those that need no image but that "
             "variant's (and IMAGES_FOR_INTEGRATION), which `make test` runs right after the variant's "
             "acceptance run so that its image can go then, not at the end")


def pytest_collection_modifyitems(config, items):
    variant = config.getoption("--lane-image")
    if not variant:
        return
    marked = {m.args[0] for item in items for m in item.iter_markers("lane_image")}
    if variant not in marked:
        raise pytest.UsageError(f"--lane-image {variant}: no collected test is marked lane_image({variant!r}); "
                                f"marked: {', '.join(sorted(marked)) or 'none'}")
    keep = [i for i in items if any(m.args[0] == variant for m in i.iter_markers("lane_image"))]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
