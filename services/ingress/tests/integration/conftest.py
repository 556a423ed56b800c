"""In-process ingress app on the test's real nats-server (no writer): an httpx client."""

from __future__ import annotations

import httpx
import pytest_asyncio

from aimem_ingress.app import create_app


@pytest_asyncio.fixture
async def ingress(settings):
    """``(client, app)``: the ingress app with its lifespan running, over ASGI."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingress") as client:
            yield client, app
