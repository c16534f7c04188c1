"""The router's /metrics: every replica's Prometheus page merged into one valid page, each sample labelled
with its replica (`replica="i"`), each metric family's HELP/TYPE once."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?(\s.*)$")


def merge_metrics(pages: list[tuple[int, str]]) -> str:
    """Prometheus text pages of several replicas as one: a `replica` label on every sample, each family's
    HELP and TYPE once and all its samples together (the text format wants a family in one group)."""
    families: dict[str, tuple[dict[str, str], list[str]]] = {}
    for index, text in pages:
        current = None
        for line in text.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                parts = line.split(maxsplit=3)
                if len(parts) >= 3:
                    current = parts[2]
                    families.setdefault(current, ({}, []))[0].setdefault(parts[1], line)
                continue
            m = _SAMPLE.match(line)
            if not m or line.startswith("#"):
                continue
            name, labels, rest = m.groups()
            inner = labels[1:-1].strip().rstrip(",") if labels else ""
            family = current if current and name.startswith(current) else name
            sample = f'{name}{{replica="{index}"{"," + inner if inner else ""}}}{rest}'
            families.setdefault(family, ({}, []))[1].append(sample)
    out: list[str] = []
    for meta, samples in families.values():
        out += [meta[k] for k in ("HELP", "TYPE") if k in meta] + samples
    return "\n".join(out) + ("\n" if out else "")
