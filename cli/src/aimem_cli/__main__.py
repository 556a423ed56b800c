"""`python -m aimem_cli` = `aimem`."""

from aimem_cli.main import main

main()
