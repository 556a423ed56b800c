"""`python -m aimem_ingress`: run the ingress service with the shared config (`config.load()`).

``ingress.workers`` (``AIMEM_INGRESS__WORKERS``, ``aimem up --ingress-workers N``) uvicorn
processes share the port: ingress keeps no state between requests (JetStream dedupes by
``Nats-Msg-Id``, the lag gate is a per-process cache), so it scales by processes.
"""

from fastapi import FastAPI

from aimem_common.service import main_entry, worker_app

from aimem_ingress.app import create_app


def worker() -> FastAPI:
    """The app of one uvicorn worker process (``ingress.workers`` > 1)."""
    return worker_app("ingress", create_app)


def main() -> None:
    """Entry point of the `aimem-ingress` script and of `python -m aimem_ingress`."""
    main_entry("ingress", create_app, workers=lambda s: s.ingress.workers,
               worker_factory="aimem_ingress.__main__:worker")


if __name__ == "__main__":
    main()
