"""Errors the CLI turns into one line on stderr and an exit code (no traceback)."""

from __future__ import annotations

# The smoke's out-of-memory code, passed through; also for a container the kernel OOM-killed.
from kerasenv_image.smoke.errors import EXIT_OOM  # noqa: F401

# Exit codes of the `kerasenv` CLI (documented in the README).
EXIT_OK = 0
EXIT_FAILURE = 1  # the operation ran and failed (e.g. a build step failed)
EXIT_USAGE = 2  # bad input or an unusable host: nothing was attempted
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C)
EXIT_TERMINATED = 143  # SIGTERM (docker stop, kill, a CI runner's timeout)
EXIT_BROKEN_PIPE = 141  # stdout's reader went away (`kerasenv list | head -1`), as for SIGPIPE


class KerasenvError(Exception):
    """A failure with a message that names the cause and the fix."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details  # extra lines printed after the message (e.g. build log tail)


class UsageError(KerasenvError):
    exit_code = EXIT_USAGE


class MatrixError(UsageError):
    """images/matrix.toml is malformed or inconsistent."""


class DockerUnavailable(UsageError):
    """The Docker daemon cannot be reached."""


class BuildFailed(KerasenvError):
    """docker build failed; details carry the failing step and its last lines."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the CLI is so `finally` blocks clean up as for Ctrl-C."""
