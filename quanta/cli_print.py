"""What the command line prints with: the rich consoles, made on first use (a `quanta simulate
--quiet` process never imports rich's console), plain text and Quanta's table style."""

from __future__ import annotations

import json
import math
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
    """A table in Quanta's style: a rule under the header only, the title (if any) flush left
    above it, wrapped at the console's width (rich wraps a title at the table's: a narrow table
    broke it mid-phrase)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    class _Table(Table):
        def __rich_console__(self, console, options):
            head, self.title = self.title, None
            try:
                if head is not None:          # (a str as it is: never read as markup)
                    yield Text(head) if isinstance(head, str) else head
                yield from super().__rich_console__(console, options)
            finally:
                self.title = head
    return _Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, **options)


def print_listing(rows, name_width: int, indent: int = 0) -> None:
    """(name, description) rows, as `quanta policies`, `clusters` and `traces` list them: on a
    terminal a description too long for a line wraps under itself; elsewhere (a pipe, a file)
    each row is one line, whole, for grep."""
    out = console()
    if not out.is_terminal:
        for name, desc in rows:
            out.print(rich_text(f"{' ' * indent}{name:{name_width}s} {desc}"), soft_wrap=True)
        return
    from rich.table import Table
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=indent + name_width, no_wrap=True)
    grid.add_column(overflow="fold")
    for name, desc in rows:
        grid.add_row(rich_text(" " * indent + name), rich_text(desc))
    out.print(grid)


def json_text(obj, indent: int | None = None) -> str:
    """JSON with no NaN or Infinity (which are not JSON: a per-queue average over no job was
    NaN): null in their place; numpy scalars as numbers."""
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v
    return json.dumps(clean(obj), allow_nan=False, indent=indent)


def print_json(obj) -> None:
    """`--json` output of any command: json_text on standard output, coloured on a terminal."""
    console().print_json(json_text(obj))
