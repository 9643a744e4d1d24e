"""``python -m agenticdb.cli`` runs the CLI."""

from agenticdb.cli import main

main()
