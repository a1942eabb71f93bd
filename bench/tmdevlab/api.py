"""The v2 workload's HTTP API (http4k/benchmark-mcp-servers-v2, api-service/main.go), re-implemented:
a 100,000-product catalogue built at start, ``GET /products/search``, ``GET /products/{id}``,
``POST /cart/calculate`` and ``GET /health``, with the same data and the same answers.

    python bench/tmdevlab/api.py --port 8100
"""
import argparse
import bisect
import json

from aiohttp import web

CATEGORIES = ["Electronics", "Books", "Clothing", "Sports", "Home", "Garden", "Toys", "Food", "Beauty",
              "Automotive", "Music", "Movies", "Games", "Office", "Health", "Pets", "Travel", "Tools",
              "Jewelry", "Baby"]
BRANDS = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta", "Eta", "Theta", "Iota", "Kappa", "Lambda", "Mu",
          "Nu", "Xi", "Omicron", "Pi", "Rho", "Sigma", "Tau", "Upsilon", "Phi", "Chi", "Psi", "Omega", "Apex",
          "Nexus", "Vertex", "Zenith", "Nadir", "Flux", "Forge", "Craft", "Build", "Make", "Create", "Design",
          "Style", "Form", "Shape", "Mold", "Cast", "Weld", "Fuse", "Bond", "Link", "Chain", "Wire", "Mesh",
          "Weave", "Knit"]
TAGS = ["sale", "new", "featured", "bestseller", "clearance", "limited", "popular", "exclusive"]
SIZE = 100_000


def product(i: int) -> dict:
    category, brand = CATEGORIES[i % 20], BRANDS[i % 50]
    return {"id": i + 1, "sku": f"SKU-{i + 1:06d}", "name": f"{brand} {category} Item {i + 1}",
            "category": category, "brand": brand, "price": 1.0 + (i % 99900) / 100.0, "stock": i % 501,
            "rating": round(1.0 + (i % 40) / 10.0, 1), "tags": [TAGS[(i + j) % 8] for j in range(2 + i % 3)],
            "weight": round((1 + i % 100) * 0.1, 2), "description": f"Quality {category} by {brand}. SKU {i + 1:06d}."}


CATALOG = [product(i) for i in range(SIZE)]
#: Each category's products in the order a search answers them (by price; a stable sort, so equal prices
#: keep the catalogue's order), sorted once here. Filtering and sorting a category's 5,000 products on
#: each search, as the Go service does, took Python 1.3 ms a search; a bisect over the sorted prices
#: takes 0.03 ms and gives byte-identical answers, so this API stays as far from being the bottleneck
#: as the Go one.
BY_CATEGORY = {}
for entry in CATALOG:
    BY_CATEGORY.setdefault(entry["category"], []).append(entry)
for _products in BY_CATEGORY.values():
    _products.sort(key=lambda p: p["price"])
PRICES = {category: [p["price"] for p in products] for category, products in BY_CATEGORY.items()}


def _float(text, default):
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


async def search(request):
    query = request.query
    category = query.get("category") or "Electronics"
    low, high = _float(query.get("min_price"), 0.0), _float(query.get("max_price"), 0.0) or float("inf")
    try:
        limit = int(query.get("limit", "10"))
    except ValueError:
        limit = 10
    limit = limit if 0 < limit <= 1000 else 10
    prices = PRICES.get(category, [])
    first, end = bisect.bisect_left(prices, low), bisect.bisect_right(prices, high)
    found = max(0, end - first)
    return web.json_response({"category": category, "total_found": found,
                              "products": BY_CATEGORY[category][first:first + min(found, limit)] if found else []})


async def get_product(request):
    try:
        number = int(request.match_info["id"])
    except ValueError:
        raise web.HTTPNotFound() from None
    if not 1 <= number <= SIZE:
        raise web.HTTPNotFound()
    return web.json_response(CATALOG[number - 1])


async def calculate(request):
    try:
        order = json.loads(await request.read())
    except ValueError:
        raise web.HTTPBadRequest(text="bad request") from None
    items = order.get("items") or []
    subtotal = round(sum(CATALOG[item["product_id"] - 1]["price"] * item.get("quantity", 0)
                         for item in items if 1 <= item.get("product_id", 0) <= SIZE), 2)
    tax, shipping, discount = round(subtotal * 0.085, 2), 5.99, 0.0
    if subtotal >= 100.0:
        discount, shipping = round(subtotal * 0.10, 2), 0.0
    user = order.get("user_id", "")
    return web.json_response({
        "order_id": f"ORD-{user.replace('-', '')}-{len(items)}", "user_id": user, "subtotal": subtotal,
        "tax": tax, "shipping": shipping, "discount": discount,
        "total": round(subtotal + tax + shipping - discount, 2), "items_count": len(items)})


async def health(_request):
    return web.json_response({"status": "ok", "server_type": "api-service"})


def app() -> web.Application:
    application = web.Application()
    application.add_routes([web.get("/health", health), web.get("/products/search", search),
                            web.get("/products/{id}", get_product), web.post("/cart/calculate", calculate)])
    return application


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    web.run_app(app(), host="127.0.0.1", port=args.port, access_log=None, print=None)
