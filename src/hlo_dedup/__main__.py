"""`python -m hlo_dedup`: the `hlo-dedup` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
