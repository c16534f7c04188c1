"""`ocrserve profiles`: list the model profiles or show one."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("profiles")
    def profiles(name: str = typer.Argument(None, help="profile name or file to show")) -> None:
        """List the built-in model profiles, or show one as JSON."""
        from ocrserve.profiles import PROFILES, load_profile

        if name:
            try:
                p = load_profile(name)
            except ValueError as e:
                raise typer.BadParameter(str(e)) from None
            typer.echo(p.model_dump_json(indent=2))
            return
        for n, p in PROFILES.items():
            typer.echo(f"{n}\t{p.checkpoint}\tbbox 0-{p.bbox_scale} ({p.bbox_format})\t{len(p.labels)} labels")
