"""``gsd losses``: the seed's worked numbers of the loss geometry, and optionally its figures.

Kept apart from :mod:`gsd.losses.figures` so that registering the command imports no torch.
"""

from __future__ import annotations


def register(sub) -> None:
    """Add ``gsd losses`` to the ``gsd`` command line (see gsd.cli's ``COMMANDS``)."""
    p = sub.add_parser(
        "losses",
        help="loss geometry (see docs/theory.md, section Loss geometry): the seed's worked numbers; --figures writes the PNGs",
    )
    p.add_argument(
        "--figures",
        metavar="DIR",
        nargs="?",
        const="",
        default=None,
        help="also write the loss_*.png figures (to DIR, default: the checkout's figures/)",
    )
    p.add_argument("--json", action="store_true", help="print the worked numbers as JSON records")
    p.set_defaults(func=_cli_losses)


def _cli_losses(args) -> int:
    from ..cli.support import emit
    from .figures import make_all, seed_examples

    table = seed_examples()
    emit(table, args.json, title="Loss geometry: the seed's worked numbers (see docs/theory.md, section Loss geometry)")
    if args.figures is not None:
        paths = make_all(args.figures or None)
        if not args.json:
            print("\n".join(str(p) for p in paths))
    return 0 if bool(table["agrees"].all()) else 1
