"""`python -m aimem_maintainer`: run the maintainer service with the shared config (`config.load()`)."""

from aimem_common.service import main_entry

from aimem_maintainer.app import create_app


def main() -> None:
    """Entry point of the `aimem-maintainer` script and of `python -m aimem_maintainer`."""
    main_entry("maintainer", create_app)


if __name__ == "__main__":
    main()
