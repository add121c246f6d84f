"""``python -m rankstudy <command>``: the commands the workflow's rules call.

The commands live in one module per part of the study: ``first_stage``, ``neural`` and ``study`` here,
each paper's in its package (``rankstudy.papers.PAPER.cli``; docs/architecture.md's command table): each handler is
followed by the function that declares its arguments, registered with ``@subcommand`` (``rankstudy.subcommands``)
under the command's name. Handlers only parse arguments and
call into the package; heavy imports happen inside the handlers so that ``--help`` and light commands
start fast. A ``StudyError`` (bad file, bad config) is printed as one clear line and exits with status 2,
without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys

# importing a command module registers its commands; --help lists them in this order
from rankstudy.cli import first_stage, neural, study
from rankstudy.errors import StudyError
from rankstudy.papers.choppy import cli as choppy
from rankstudy.papers.socialformer import cli as socialformer
from rankstudy.papers.tk import cli as tk
from rankstudy.papers.tkl import cli as tkl
from rankstudy.subcommands import SUBCOMMANDS

COMMAND_MODULES = (first_stage, neural, tk, tkl, socialformer, choppy, study)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rankstudy", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_arguments) in SUBCOMMANDS.items():
        add_arguments(commands.add_parser(name, help=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        args.handler(args)
    except StudyError as error:
        print(f"rankstudy {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0
