"""What the command line prints with: the rich consoles, made on first use (a `quanta simulate
--quiet` process never imports rich's console), plain text and Quanta's table style."""

from __future__ import annotations

import sys
from functools import lru_cache


@lru_cache(maxsize=None)
def console(stderr: bool = False):
    """The rich console of standard output (pipes and logs get full rows) or of standard error.
    emoji=False: text such as "synthetic:-1:10" is never turned into an emoji."""
    from rich.console import Console
    if stderr:
        return Console(stderr=True, emoji=False)
    return Console(width=None if sys.stdout.isatty() else 120, emoji=False)


def rich_text(value, style: str | None = None):
    """Text printed as it is: never read as rich markup ("[philly]") or emoji (":-1:")."""
    from rich.text import Text
    return Text(str(value), style=style or "")


def rich_table(title=None, **options):
    """A table in Quanta's style: a rule under the header only, the title (if any) flush left."""
    from rich import box
    from rich.table import Table
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, **options)
