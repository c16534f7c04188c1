"""`ocrserve profiles`: list the model profiles or show one."""

from __future__ import annotations

import typer

COLUMNS = ["PROFILE", "CHECKPOINT", "PROMPT", "BBOX", "LABELS", "PIXEL BUDGET", "SAMPLING (RETRY)"]


def _num(x: float) -> str:
    return f"{x:g}"


def profile_row(p) -> list[str]:
    """One profile as the columns of COLUMNS."""
    s, r = p.sampling, p.retry_sampling
    return [
        p.name,
        p.checkpoint,
        p.prompt_file,
        f"0-{p.bbox_scale} {p.bbox_format}",
        str(len(p.labels)),
        f"{p.max_pixels / 1e6:.2f} MP max, PDFs at {_num(p.pdf_dpi)} dpi, sides /{p.patch_multiple}",
        f"temp {_num(s.temperature)} top_p {_num(s.top_p)} max {s.max_tokens} tokens "
        f"(temp {_num(r.temperature)} top_p {_num(r.top_p)}, {p.max_retries} retries)",
    ]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


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
        typer.echo(table([COLUMNS] + [profile_row(p) for p in PROFILES.values()]))
