"""`python -m aimem_mcp`: run the mcp-gateway service with the shared config (`config.load()`)."""

from aimem_common.service import main_entry

from aimem_mcp.app import create_app


def main() -> None:
    """Entry point of the `aimem-mcp-gateway` script and of `python -m aimem_mcp`."""
    main_entry("mcp-gateway", create_app)


if __name__ == "__main__":
    main()
