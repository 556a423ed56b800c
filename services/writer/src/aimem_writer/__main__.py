"""`python -m aimem_writer`: run the writer service with the shared config (`config.load()`)."""

from aimem_common.service import main_entry

from aimem_writer.app import create_app


def main() -> None:
    """Entry point of the `aimem-writer` script and of `python -m aimem_writer`."""
    main_entry("writer", create_app)


if __name__ == "__main__":
    main()
