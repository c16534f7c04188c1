"""Help that reads like a conventional CLI whatever the typer version.

typer 0.27+ labels every value with its Python type (`--force <bool>`, `<list[str]>`, usage
`{inputs}...`). Explicit metavars win over that in every version: flags get none, an option's value
is named by its type the way click does (TEXT, INTEGER, [a|b]), an argument by its name (INPUTS...).
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "str": "TEXT",
    "text": "TEXT",
    "int": "INTEGER",
    "integer": "INTEGER",
    "float": "FLOAT",
    "path": "PATH",
    "bool": "BOOLEAN",
    "boolean": "BOOLEAN",
}


def _is_flag(p: Any) -> bool:
    return bool(getattr(p, "is_flag", False)) or bool(getattr(p, "count", False))


def _value_metavar(p: Any) -> str:
    """TEXT, INTEGER, FLOAT, PATH or [a|b]: from the click type (typer < 0.29) or the annotation (0.29+)."""
    kind = getattr(p, "type", None)
    desc = getattr(p, "type_descriptor", None)
    choices = getattr(kind, "choices", None) or getattr(desc, "choices", None)
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    if kind is not None:
        name = str(getattr(kind, "name", "") or "")
    else:
        ann = getattr(desc, "annotation", None)
        args = getattr(ann, "__args__", None)
        if args and getattr(desc, "is_list", False):
            ann = args[0]
        name = "path" if getattr(desc, "is_path", False) else getattr(ann, "__name__", "")
    return _NAMES.get(name.lower(), name.upper() or "VALUE")


def _arg_usage(p: Any, ctx: Any = None) -> list[str]:
    name = p.metavar
    if not p.required:
        name = f"[{name}]"
    if p.nargs != 1:
        name += "..."
    return [name]


def plain_help(cmd: Any) -> Any:
    """Set conventional metavars on a click command tree (typer.main.get_command(app)); returns it."""
    for p in getattr(cmd, "params", []):
        if getattr(p, "param_type_name", "") == "argument":
            kind = _value_metavar(p)
            if p.metavar is None:
                p.metavar = (p.name or "arg").upper()
            # the usage line (INPUTS..., [NAME]) and the type column (TEXT), which typer 0.29 takes
            # from the annotation even when a metavar is set
            p.get_usage_pieces = lambda ctx=None, _p=p: _arg_usage(_p, ctx)
            p.display_type_rich = lambda ctx=None, _k=kind: _k
        elif p.metavar is None:
            p.metavar = "" if _is_flag(p) else _value_metavar(p)
    get_help_option = getattr(cmd, "get_help_option", None)
    if get_help_option is not None:

        def _help_option(ctx: Any, _get: Any = get_help_option) -> Any:
            opt = _get(ctx)
            if opt is not None and opt.metavar is None:
                opt.metavar = ""  # --help is a flag
            return opt

        cmd.get_help_option = _help_option
    for sub in (getattr(cmd, "commands", None) or {}).values():
        plain_help(sub)
    return cmd
