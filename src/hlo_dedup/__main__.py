"""`python -m hlo_dedup`: the `hlo-dedup` command."""

from .cli import entry

if __name__ == "__main__":
    entry()
