"""`python -m aimem_ingress`: run the ingress service with the shared config (`config.load()`)."""

from aimem_common.service import main_entry

from aimem_ingress.app import create_app


def main() -> None:
    """Entry point of the `aimem-ingress` script and of `python -m aimem_ingress`."""
    main_entry("ingress", create_app)


if __name__ == "__main__":
    main()
