"""The v2 workload's Python server (python-server/main.py of http4k/benchmark-mcp-servers-v2) on the
newest FastMCP, as the benchmark runs it: stateless, JSON replies, one httpx and one Redis client
per process, the same three tools and answers. Run in its own virtualenv (bench/tmdevlab/run.py
makes it): ``uvicorn fastmcp_server:app``."""
import asyncio
import contextlib
import json
import os
import time

import httpx
import redis.asyncio as aioredis
from fastmcp import FastMCP
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

API_SERVICE_URL = os.environ["API_SERVICE_URL"]
REDIS_URL = os.environ["BENCH_DATA_REDIS_URL"]
SERVER_TYPE = "fastmcp"
clients = {}

mcp = FastMCP("BenchmarkPythonServer")


@mcp.tool()
async def search_products(category: str = "Electronics", min_price: float = 50.0, max_price: float = 500.0,
                          limit: int = 10) -> str:
    """Search products by category and price range, merged with popularity data."""
    params = {"category": category, "min_price": min_price, "max_price": max_price, "limit": limit}
    found, popular = await asyncio.gather(
        clients["http"].get("/products/search", params=params),
        clients["redis"].zrevrangebyscore("bench:popular", "+inf", "-inf", start=0, num=10))
    found = found.json()
    top10 = [int(member.split(":")[1]) for member in popular]
    rank = {product_id: place + 1 for place, product_id in enumerate(top10)}
    products = [{"id": p["id"], "sku": p["sku"], "name": p["name"], "price": p["price"], "rating": p["rating"],
                 "popularity_rank": rank.get(p["id"], 0)} for p in found.get("products", [])]
    return json.dumps({"category": category, "total_found": found.get("total_found", 0), "products": products,
                       "top10_popular_ids": top10, "server_type": SERVER_TYPE})


@mcp.tool()
async def get_user_cart(user_id: str = "user-00042") -> str:
    """Get user cart details with recent order history."""
    cart = await clients["redis"].hgetall(f"bench:cart:{user_id}")
    items = json.loads(cart.get("items", "[]"))
    first = items[0]["product_id"] if items else 1
    _product, history = await asyncio.gather(clients["http"].get(f"/products/{first}"),
                                             clients["redis"].lrange(f"bench:history:{user_id}", 0, 4))
    return json.dumps({"user_id": user_id,
                       "cart": {"items": items, "item_count": len(items), "estimated_total": float(cart.get("total", 0))},
                       "recent_history": [json.loads(entry) for entry in history], "server_type": SERVER_TYPE})


@mcp.tool()
async def checkout(user_id: str = "user-00042", items: list = None) -> str:
    """Process checkout: calculate total, update rate limit, record history."""
    items = items or [{"product_id": 42, "quantity": 2}, {"product_id": 1337, "quantity": 1}]
    user_number = int(user_id.split("-")[1]) if "-" in user_id else 42
    order = json.dumps({"order_id": f"ORD-{user_id}-{int(time.time())}", "items": items, "ts": int(time.time())})
    product_id = items[0]["product_id"] if items else 1
    calculated, rate_count, _, _ = await asyncio.gather(
        clients["http"].post("/cart/calculate", json={"user_id": user_id, "items": items}),
        clients["redis"].incr(f"bench:ratelimit:user-{user_number % 100:05d}"),
        clients["redis"].rpush(f"bench:history:{user_id}", order),
        clients["redis"].zadd("bench:popular", {f"product:{product_id}": 1}, incr=True))
    calculated = calculated.json()
    return json.dumps({"order_id": calculated.get("order_id", f"ORD-{user_id}-{int(time.time())}"),
                       "user_id": user_id, "total": calculated.get("total", 0), "items_count": len(items),
                       "rate_limit_count": rate_count, "status": "confirmed", "server_type": SERVER_TYPE})


mcp_app = mcp.http_app(path="/mcp", stateless_http=True, json_response=True)


@contextlib.asynccontextmanager
async def lifespan(app):
    clients["http"] = httpx.AsyncClient(base_url=API_SERVICE_URL, timeout=10.0)
    clients["redis"] = aioredis.from_url(REDIS_URL, decode_responses=True)
    async with mcp_app.lifespan(app):
        yield
    await clients["http"].aclose()
    await clients["redis"].aclose()


async def health(_request):
    return JSONResponse({"status": "ok", "server_type": SERVER_TYPE})


app = Starlette(lifespan=lifespan, routes=[Route("/health", health), Mount("/", mcp_app)])
