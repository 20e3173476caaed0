"""The OpenAPI document at /openapi.json."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def openapi(request: Request) -> Response:
    return JSONResponse({"openapi": "3.1.0", "info": {"title": "liuyi", "version": "0.1.0"}, "paths": {}})


def openapi_route() -> Route:
    return Route("/openapi.json", openapi, methods=["GET"])
