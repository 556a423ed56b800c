"""`python -m aimem_query`: run the query service with the shared config (`config.load()`)."""

from aimem_common.service import main_entry

from aimem_query.app import create_app


def main() -> None:
    """Entry point of the `aimem-query` script and of `python -m aimem_query`."""
    main_entry("query", create_app)


if __name__ == "__main__":
    main()
