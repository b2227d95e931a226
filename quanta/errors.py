"""User-facing errors: each carries one line that names the file, line or field at fault."""


class QuantaError(Exception):
    """A user's mistake (bad input, bad spec). The CLI prints str(err) on one line and exits 2."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None):
        where = []
        if source:
            where.append(str(source) + (f":{line}" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field '{printable(field)}'")
        self.source, self.line, self.field = source, line, field
        self.bare = message
        super().__init__((": ".join(where) + ": " if where else "") + message)


def printable(value: object, *, tabs: bool = False) -> str:
    """User data shown on one line or a terminal: control characters (newlines, escape sequences,
    carriage returns, tabs unless `tabs`) written as \\xNN, so a name neither breaks a one-line
    error in two nor moves the cursor or recolours the screen."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (tabs and c == "\t") else f"\\x{ord(c):02x}"
                   if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text)
