"""The bench's command line (kerasenv_image.bench.args)."""

from __future__ import annotations

import pytest

from kerasenv_image.bench import args, protocol


def test_list_parsers():
    assert args.parse_batch_sizes("1024,32,32,128") == [32, 128, 1024]
    for bad in ("", "0", "32,abc", "100000"):
        with pytest.raises(ValueError):
            args.parse_batch_sizes(bad)
    assert args.parse_list("mlp,conv,mlp", protocol.MODELS, "models") == ["mlp", "conv"]
    with pytest.raises(ValueError):
        args.parse_list("resnet", protocol.MODELS, "models")
