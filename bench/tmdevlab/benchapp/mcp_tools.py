"""The v2 workload's three tools, as a Django team writes them with this app: async ``@tool``
functions on the event loop, their Redis and HTTP clients made once per process (``@per_process``),
the same calls and the same answers as the benchmark's Python server (python-server/main.py)."""
import asyncio
import json
import os
import time

import aiohttp
import redis.asyncio

from mcp_transport import per_process, tool

SERVER_TYPE = "django-mcp-transport"


@per_process
def api() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(base_url=os.environ["API_SERVICE_URL"], timeout=aiohttp.ClientTimeout(total=10))


@per_process
def data() -> redis.asyncio.Redis:
    # A pool that waits for a free connection past its size: redis-py's default one raises
    # MaxConnectionsError past 100, which 50 users' checkouts (3 commands at once each) reach.
    pool = redis.asyncio.BlockingConnectionPool.from_url(os.environ["BENCH_DATA_REDIS_URL"], max_connections=100,
                                                         timeout=10, decode_responses=True)
    return redis.asyncio.Redis(connection_pool=pool)


async def _get_json(path, params=None):
    async with api().get(path, params=params) as response:
        return await response.json()


async def _post_json(path, body):
    async with api().post(path, json=body) as response:
        return await response.json()


@tool
async def search_products(category: str = "Electronics", min_price: float = 50.0, max_price: float = 500.0,
                          limit: int = 10) -> str:
    """Search products by category and price range, merged with popularity data."""
    params = {"category": category, "min_price": min_price, "max_price": max_price, "limit": limit}
    found, popular = await asyncio.gather(
        _get_json("/products/search", params),
        data().zrevrangebyscore("bench:popular", "+inf", "-inf", start=0, num=10))
    top10 = [int(member.split(":")[1]) for member in popular]
    rank = {product_id: place + 1 for place, product_id in enumerate(top10)}
    products = [{"id": p["id"], "sku": p["sku"], "name": p["name"], "price": p["price"], "rating": p["rating"],
                 "popularity_rank": rank.get(p["id"], 0)} for p in found.get("products", [])]
    return json.dumps({"category": category, "total_found": found.get("total_found", 0), "products": products,
                       "top10_popular_ids": top10, "server_type": SERVER_TYPE})


@tool
async def get_user_cart(user_id: str = "user-00042") -> str:
    """Get user cart details with recent order history."""
    cart = await data().hgetall(f"bench:cart:{user_id}")
    items = json.loads(cart.get("items", "[]"))
    first = items[0]["product_id"] if items else 1
    _product, history = await asyncio.gather(_get_json(f"/products/{first}"),
                                             data().lrange(f"bench:history:{user_id}", 0, 4))
    return json.dumps({"user_id": user_id,
                       "cart": {"items": items, "item_count": len(items), "estimated_total": float(cart.get("total", 0))},
                       "recent_history": [json.loads(entry) for entry in history], "server_type": SERVER_TYPE})


@tool
async def checkout(user_id: str = "user-00042", items: list = None) -> str:
    """Process checkout: calculate total, update rate limit, record history."""
    items = items or [{"product_id": 42, "quantity": 2}, {"product_id": 1337, "quantity": 1}]
    user_number = int(user_id.split("-")[1]) if "-" in user_id else 42
    order = json.dumps({"order_id": f"ORD-{user_id}-{int(time.time())}", "items": items, "ts": int(time.time())})
    product_id = items[0]["product_id"] if items else 1
    calculated, rate_count, _, _ = await asyncio.gather(
        _post_json("/cart/calculate", {"user_id": user_id, "items": items}),
        data().incr(f"bench:ratelimit:user-{user_number % 100:05d}"),
        data().rpush(f"bench:history:{user_id}", order),
        data().zadd("bench:popular", {f"product:{product_id}": 1}, incr=True))
    return json.dumps({"order_id": calculated.get("order_id", f"ORD-{user_id}-{int(time.time())}"),
                       "user_id": user_id, "total": calculated.get("total", 0), "items_count": len(items),
                       "rate_limit_count": rate_count, "status": "confirmed", "server_type": SERVER_TYPE})
