"""`kerasenv` command line: the top-level parser, and error reporting.

Each sub-package registers its own subcommands (<package>/commands.py: `register(subparsers)`,
each subcommand with a `handler(args, matrix)`); this module adds the global flags, installs
the SIGTERM handler and turns a KerasenvError, a closed pipe, Ctrl-C and SIGTERM into one
line on stderr and an exit code (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from . import __version__
from .bench import commands as bench_commands
from .images import build
from .images import commands as images_commands
from .errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, KerasenvError, Terminated
from .host import commands as host_commands
from .host import container_env
from .host import gpu_choice
from .host import variant_choice
from .hpc import commands as hpc_commands
from .matrix import commands as matrix_commands
from .matrix.schema import DEFAULT_MATRIX, load
from .publish import commands as publish_commands
from .run import commands as run_commands
from .run import session
from .security import commands as security_commands

# `kerasenv --help` lists the commands in the order a user meets them, not package by package.
HELP_ORDER = ("list", "generate", "lock", "layers", "build", "base-offline", "doctor", "rocm-groups", "gpu-host-check", "smoke", "run",
              "shell", "lab", "multiworker", "sif", "push", "pull", "matrix", "sbom", "kernel-targets", "tags", "size",
              "bench", "bench-pull", "bench-report", "audit", "debian-updates", "clean", "drop-build-cache")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kerasenv",
        description="Versioned TensorFlow + Keras images that prove they work on your GPU.")
    p.add_argument("--version", action="version", version=f"kerasenv {__version__}")
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX,
                   help="version matrix file (default: images/matrix.toml)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for package in (matrix_commands, images_commands, host_commands, publish_commands, bench_commands,
                    security_commands, hpc_commands):
        package.register(sub)
    # run/ may not import host/ (the variant `auto` picks, --gpus resolved with the doctor's facts,
    # the host shape's container settings) nor images/ (--build-missing): handed in.
    run_commands.register(sub, session.Upstream(chooser=variant_choice, builder=build, gpus=gpu_choice,
                                                host_env=container_env))
    _in_help_order(sub)
    return p


def _in_help_order(sub: argparse._SubParsersAction) -> None:
    """Put the subcommands in HELP_ORDER (any other last): argparse keeps the order they were
    added in, both for the help's list and for the "choose from" of an unknown command."""
    rank = {name: i for i, name in enumerate(HELP_ORDER)}

    def key(name: str) -> int:
        return rank.get(name, len(HELP_ORDER))

    sub._choices_actions.sort(key=lambda action: key(action.dest))
    ordered = sorted(sub.choices.items(), key=lambda item: key(item[0]))
    sub.choices.clear()
    sub.choices.update(ordered)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` goes to the container: a command (run) or extra
    # smoke_train.py flags (smoke). Split before argparse, which would mix them up.
    extra: list[str] = []
    if "--" in argv:
        extra, argv = argv[argv.index("--") + 1:], argv[: argv.index("--")]
    args = _parser().parse_args(argv)
    args.cmd = extra
    # SIGTERM is handled like Ctrl-C so `finally` blocks clean up (containers, temp files),
    # and exits 143 as a process killed by SIGTERM would.
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        matrix = load(args.matrix)
        return args.handler(args, matrix) or EXIT_OK
    except KerasenvError as exc:
        if args.debug:
            raise
        print(f"kerasenv: error: {exc.message}", file=sys.stderr)
        if exc.details:
            print(exc.details, file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `kerasenv list | head -1`: the reader left. Say nothing more, as `cat` would;
        # stdout goes to /dev/null so the interpreter's final flush cannot fail again.
        # https://docs.python.org/3/library/signal.html#note-on-sigpipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"kerasenv: {'terminated (SIGTERM)' if terminated else 'interrupted'}: nothing was left "
              "running; `make clean` removes leftovers of a CLI that was killed outright", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def _raise_terminated(signum, frame):
    # Only the first SIGTERM interrupts: a second one during clean-up must not cut it short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()
