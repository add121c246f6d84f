"""The subcommand registry: each command module (``rankstudy.cli.*``, ``rankstudy.papers.*.cli``) registers its
commands' argument declarations with ``@subcommand``; ``rankstudy.cli.build_parser`` adds them to the parser.
A module of the lowest layer, so that the papers' command modules register without importing ``cli/`` above them
(docs/architecture.md, "Layers")."""

from __future__ import annotations

import argparse
from typing import Callable

AddArguments = Callable[[argparse.ArgumentParser], None]
SUBCOMMANDS: dict[str, tuple[str, AddArguments]] = {}  # name -> (help, the function declaring its arguments)


def subcommand(name: str, help_text: str) -> Callable[[AddArguments], AddArguments]:
    """Register the decorated function as the argument declarations of subcommand ``name``."""
    def register(add_arguments: AddArguments) -> AddArguments:
        if name in SUBCOMMANDS:
            raise ValueError(f"subcommand {name!r} is registered twice")
        SUBCOMMANDS[name] = (help_text, add_arguments)
        return add_arguments
    return register


def scoring_arguments(parser: argparse.ArgumentParser, batch_size: int, several_queries: bool = False) -> None:
    """What every command that scores with a trained model needs: the model, its inputs, and how to run it
    (the lengths come from the model's directory: ``experiment.InputSpec``). ``several_queries``: --queries takes
    one token store or more (a command that scores several splits with the model it loaded once)."""
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--embeddings", required=True)
    parser.add_argument("--queries", required=True, nargs="+" if several_queries else None,
                        help="token store(s) of the queries")
    parser.add_argument("--documents", required=True, help="token store of the collection")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)
