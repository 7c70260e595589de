"""JSON files written atomically: to a temporary file beside the target, fsync'ed, then
renamed over it, so a reader (the host tool, TensorBoard, a user's script) sees the old file
or the new one, never half of one; on any error nothing is left behind. One implementation for
the smoke training's report and history in the image and the benchmark's results on the host."""

from __future__ import annotations

import json
import os
import tempfile


def write_atomically(value, target: str, *, sort_keys: bool = True) -> None:
    """`value` as indented JSON in `target` (mode 0644). NaN and infinities are refused
    (ValueError), as JSON has no such numbers: callers decide what they become."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target) or ".", prefix=".tmp-", suffix=".json")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as handle:
            json.dump(value, handle, indent=2, sort_keys=sort_keys, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
