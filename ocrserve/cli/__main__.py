"""`python -m ocrserve.cli` = the `ocrserve` command."""

from ocrserve.cli import main

main()
