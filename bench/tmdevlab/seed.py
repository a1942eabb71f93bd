"""The v2 workload's Redis data (infra/redis/seed.py of http4k/benchmark-mcp-servers-v2), the same
keys and values: 10,000 carts, 1,000 order histories of 20 entries, ``bench:popular`` with 100,000
members, 100 rate-limit counters.

    python bench/tmdevlab/seed.py redis://127.0.0.1:6379/0
"""
import json
import sys

import redis


def carts(pipe):
    for n in range(1, 10_001):
        items = [{"product_id": (n * 7) % 100_000 + 1, "qty": 1 + n % 3},
                 {"product_id": (n * 13) % 100_000 + 1, "qty": 1 + n % 2}]
        if n % 3 == 0:
            items.append({"product_id": (n * 17) % 100_000 + 1, "qty": 1})
        total = sum(it["qty"] * (((it["product_id"] * 100) % 9_999) + 1) / 100.0 for it in items)
        pipe.hset(f"bench:cart:user-{n:05d}", mapping={
            "user_id": f"user-{n:05d}", "items": json.dumps(items), "created": "1740000000",
            "expires": "1740086400", "total": f"{total:.2f}"})


def histories(pipe):
    for n in range(1, 1_001):
        key = f"bench:history:user-{n:05d}"
        pipe.delete(key)
        pipe.rpush(key, *(json.dumps({"order_id": f"ORD-{n:05d}-{j:02d}", "product_id": (n * j * 7) % 100_000 + 1,
                                      "qty": 1 + j % 3, "price": round(((n * j * 13) % 9_999 + 1) / 100.0, 2),
                                      "ts": 1_740_000_000 + n * 86_400 + j * 3_600}) for j in range(1, 21)))


def popular(pipe):
    pipe.delete("bench:popular")
    for start in range(1, 100_001, 5_000):
        pipe.zadd("bench:popular", {f"product:{i}": i * 7 % 10_000 for i in range(start, start + 5_000)})


def rate_limits(pipe):
    for n in range(1, 101):
        pipe.set(f"bench:ratelimit:user-{n:05d}", 0)


def seed(url: str) -> None:
    client = redis.Redis.from_url(url)
    for part in (carts, histories, popular, rate_limits):
        pipe = client.pipeline(transaction=False)
        part(pipe)
        pipe.execute()


if __name__ == "__main__":
    seed(sys.argv[1])
