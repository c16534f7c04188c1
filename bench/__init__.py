"""The benchmark scripts (`python -m bench.<name> --help` from the repository root; bench/README.md)."""
