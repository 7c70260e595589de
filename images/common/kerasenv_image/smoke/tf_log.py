"""TensorFlow's C++ log, kept while it is shown: the first relevant line goes into the report.

TF and XLA log through absl to file descriptor 2, below Python. StderrTee puts a pipe
behind fd 2: a thread copies every byte to the real stderr at once and keeps the last
lines, so a failure can quote the line that explains it (e.g. the cuDNN autotuner's).
With a LogFilter (log_filter.py, the default; --verbose runs without) the copy to the
terminal goes line by line and leaves out known noise; what is kept is always every line.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import threading

# absl's format: "E0000 00:00:1748720218.610720 27 cuda_dnn.cc:529] ..." or
# "2026-12-01 12:00:00.123456: E tensorflow/.../x.cc:12] ...".
_LEVEL = re.compile(r"^(?:([EWF])\d{4} \S+\s+\d+ |\d{4}-\d\d-\d\d [\d:.]+: ([EWF]) )")
# Printed on healthy runs too: never the explanation of a failure.
NOISE = re.compile(
    r"Unable to register cu(?:DNN|FFT|BLAS) factory|failed call to cuInit|TF-TRT Warning|"
    r"oneDNN custom operations|cpu_feature_guard|NUMA node|computation placer already registered|"
    r"All log messages before absl::InitializeLog", re.I)


def relevant_line(lines: list[str]) -> str | None:
    """The first error (E/F) line that is not known noise, else the first such warning."""
    found = {"E": None, "W": None}
    for line in lines:
        match = _LEVEL.match(line)
        if not match or NOISE.search(line):
            continue
        level = "E" if (match.group(1) or match.group(2)) in "EF" else "W"
        if found[level] is None:
            found[level] = line.strip()[:400]
    return found["E"] or found["W"]


_SYNC = b"\x00kerasenv-stderr-tee-sync\n"  # written to fd 2 by sync(), never shown


class StderrTee:
    def __init__(self, keep: int = 400, echo_filter=None) -> None:
        self.echo_filter = echo_filter  # a log_filter.LogFilter, or None: echo every byte
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._saved: int | None = None
        self._thread: threading.Thread | None = None
        self._partial = b""
        self._synced = threading.Event()

    def start(self) -> "StderrTee":
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            read_end, write_end = os.pipe()
            os.dup2(write_end, 2)
            os.close(write_end)
        except OSError:  # no fd 2 to tee (closed): run without the copy
            self._saved = None
            return self
        self._thread = threading.Thread(target=self._pump, args=(read_end,), daemon=True)
        self._thread.start()
        return self

    def _pump(self, read_end: int) -> None:
        while True:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                break
            if not chunk:
                break
            synced = _SYNC in chunk
            if synced:
                chunk = chunk.replace(_SYNC, b"")
            data = self._partial + chunk
            *complete, self._partial = data.split(b"\n")
            self._echo(chunk if self.echo_filter is None else self._shown(complete))
            self.lines.extend(line.decode("utf-8", "replace") for line in complete)
            if synced:  # only once the lines before the marker are kept
                self._synced.set()
        if self.echo_filter is not None and self._partial:  # a last line without its newline
            self._echo(self._shown([self._partial], newline=b""))
        os.close(read_end)

    def _shown(self, lines: list[bytes], newline: bytes = b"\n") -> bytes:
        # Filtered whole lines only: a partial line waits for its end (or EOF) to be judged.
        show = self.echo_filter.show  # type: ignore[union-attr]
        return b"".join(line + newline for line in lines if show(line.decode("utf-8", "replace")))

    def _echo(self, data: bytes) -> None:
        if not data:
            return
        try:
            os.write(self._saved, data)  # type: ignore[arg-type]
        except (OSError, TypeError):  # TypeError: stop() gave up waiting and closed it
            pass  # the real stderr went away: keep draining so writers never block

    @property
    def hidden(self) -> int:
        """Lines the filter kept off the terminal so far (read it after stop())."""
        return self.echo_filter.hidden if self.echo_filter is not None else 0

    def stop(self) -> None:
        """Put the real stderr back; what TF wrote so far is shown and kept."""
        if self._saved is None:
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)  # closes the pipe's last write end: the thread sees EOF
        if self._thread is not None:
            self._thread.join(timeout=5)
        os.close(self._saved)
        self._saved = None

    def sync(self, timeout: float = 2.0) -> None:
        """Wait until everything written to fd 2 so far has been read (the copy is async)."""
        if self._saved is None or self._thread is None or not self._thread.is_alive():
            return
        self._synced.clear()
        try:
            os.write(2, _SYNC)  # one write below PIPE_BUF: it arrives whole, after the rest
        except OSError:
            return
        self._synced.wait(timeout)

    def relevant(self) -> str | None:
        self.sync()
        return relevant_line(list(self.lines) + ([self._partial.decode("utf-8", "replace")] if self._partial else []))
