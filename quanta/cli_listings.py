"""The listing commands: `quanta worlds`, `policies [NAME]`, `clusters`, `traces`, `catalog`."""

from __future__ import annotations

from typing import Callable, Optional

import typer

from quanta.cli_print import print_listing, rich_text


def register(app: typer.Typer, console: Callable) -> None:
    """The commands, printing on `console()` (made on first use)."""
    @app.command()
    def worlds() -> None:
        """Simulated worlds: Quanta's own and the reference simulators' replay profiles."""
        from quanta.worlds import get_world, world_names
        for name in world_names():
            line = rich_text(f"{name:12s}", "bold")
            line.append(" " + get_world(name).description)
            console().print(line)

    @app.command()
    def policies(name: Optional[str] = typer.Argument(None, metavar="[NAME]", help="a policy (or "
                                                      "module:Class): its parameters")) -> None:
        """List the scheduling policies; with NAME, that policy's parameters
        (NAME:key=value,...)."""
        from quanta.policies import POLICIES
        from quanta.policies.plugins import entry_point_infos
        if name is not None:
            from quanta.policies.registry import policy_info, policy_parameters, split_spec
            info = policy_info(split_spec(name.strip())[0])     # (NAME:key=value as --policy takes)
            typer.echo(f"{info.name}: {info.description}")       # (one line, piped or not)
            rows = [(f"{key}={default}", kind)
                    for key, kind, default in policy_parameters(info.name)]
            if rows:
                print_listing(rows, max(len(r[0]) for r in rows) + 2, indent=2)
            else:
                typer.echo("  no parameters")
            return
        rows = [(name, info.description + (f" (from {info.origin})" if info.origin else ""))
                for name, info in sorted(POLICIES.items())]
        rows += [(info.name, f"{info.description} (plugin: {info.origin})")
                 for info in entry_point_infos() if info.name not in POLICIES]
        print_listing(rows, 24)

    @app.command()
    def clusters() -> None:
        """List the cluster presets."""
        from quanta.model.presets import PRESETS
        print_listing([(name, p.description) for name, p in PRESETS.items()], 16)

    @app.command()
    def traces() -> None:
        """List the bundled trace samples and the trace formats that can be read."""
        from quanta.workloads.formats import FORMATS
        from quanta.workloads.samples import SAMPLES
        console().print(rich_text("bundled samples (use the name with --trace):"))
        print_listing([(name, f"[{fmt}] {desc}") for name, (_file, fmt, desc) in SAMPLES.items()],
                      14, indent=2)
        console().print(rich_text("formats (--format):"))
        print_listing([(name, info.description) for name, info in FORMATS.items()], 14, indent=2)

    @app.command()
    def catalog() -> None:
        """List the job types the performance models know, with their source."""
        from quanta.workloads.catalog import catalog_rows
        for r in catalog_rows():
            console().print(rich_text(f"{r.name:34s} {r.model:22s} {r.gpu_types:38s} "
                                      f"{r.cpu_mem:20s} {r.source}"), soft_wrap=True)
