"""Where Redis is (``redis_target()``): a single server, a Sentinel set or a Cluster, read from
``MCP_TRANSPORT["REDIS"]``, ``MCP_TRANSPORT["REDIS_URL"]`` or the django-redis cache (see the
package's docstring for the order)."""
import functools
from typing import NamedTuple
from urllib.parse import parse_qsl, unquote

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from ..conf import get_config, redis_url


SENTINEL_SCHEME, CLUSTER_SCHEME = "redis+sentinel", "redis+cluster"


class RedisTarget(NamedTuple):
    """Where Redis is: ``kind`` (single, sentinel, cluster), the URL of a single server, the
    (host, port) of the Sentinels or of the Cluster's seed nodes, the Sentinel master's name,
    the database, and client keyword arguments (username, password, ssl ...)."""

    kind: str
    url: str = ""
    nodes: tuple = ()
    master: str = ""
    db: int = 0
    options: dict = {}
    sentinel_options: dict = {}


def parse_redis_url(url: str) -> RedisTarget:
    """``redis://``, ``rediss://``, ``unix://`` (one server), ``redis+sentinel://[user:pass@]H:P,H:P/
    MASTER[/DB][?sentinel_password=...]`` or ``redis+cluster://[user:pass@]H:P,H:P[/0]``."""
    scheme, sep, rest = url.partition("://")
    if scheme not in (SENTINEL_SCHEME, CLUSTER_SCHEME):
        return RedisTarget("single", url=url)
    if not sep:
        raise ImproperlyConfigured(f"Redis URL {url!r} has no '://'.")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    credentials, _, hosts = netloc.rpartition("@")
    options = _credentials(credentials)
    params = dict(parse_qsl(query))
    sentinel_options = {}
    if "sentinel_password" in params:
        sentinel_options["password"] = params.pop("sentinel_password")
    if params.pop("ssl", "") in ("1", "true", "yes"):
        options["ssl"] = True
    if params:
        raise ImproperlyConfigured(f"Redis URL {url!r}: unknown parameters {', '.join(sorted(params))}.")
    nodes = tuple(_host_port(node, url) for node in hosts.split(",") if node)
    if not nodes:
        raise ImproperlyConfigured(f"Redis URL {url!r} names no host.")
    parts = [part for part in path.split("/") if part]
    if scheme == CLUSTER_SCHEME:
        if parts not in ([], ["0"]):
            raise ImproperlyConfigured(f"Redis URL {url!r}: a Redis Cluster has database 0 only.")
        return RedisTarget("cluster", nodes=nodes, options=options)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ImproperlyConfigured(f"Redis URL {url!r}: a Sentinel URL ends with /MASTER_NAME or /MASTER_NAME/DB.")
    return RedisTarget("sentinel", nodes=nodes, master=unquote(parts[0]), db=int(parts[1]) if len(parts) == 2 else 0,
                       options=options, sentinel_options=sentinel_options)


def _credentials(credentials):
    if not credentials:
        return {}
    username, colon, password = credentials.partition(":")
    if not colon:  # redis://secret@host: a password alone, as redis-py reads it
        return {"password": unquote(username)}
    return {key: unquote(value) for key, value in (("username", username), ("password", password)) if value}


def _host_port(node, url):
    host, _, port = node.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ImproperlyConfigured(f"Redis URL {url!r}: {node!r} is not HOST:PORT.")
    return host.strip("[]"), int(port)


def structured_target(spec: dict) -> RedisTarget:
    """``MCP_TRANSPORT["REDIS"]``: ``{"SENTINELS": [(host, port), ...], "MASTER_NAME": ..., "DB": 0}``
    or ``{"CLUSTER_NODES": [(host, port), ...]}``, with ``OPTIONS`` (client keyword arguments:
    username, password, ssl ...) and ``SENTINEL_OPTIONS`` (the Sentinels' own, e.g. password)."""
    unknown = set(spec) - {"SENTINELS", "MASTER_NAME", "DB", "CLUSTER_NODES", "OPTIONS", "SENTINEL_OPTIONS"}
    if unknown:
        raise ImproperlyConfigured(f"Unknown MCP_TRANSPORT['REDIS'] keys: {', '.join(sorted(unknown))}.")
    options = dict(spec.get("OPTIONS") or {})
    if bool(spec.get("SENTINELS")) == bool(spec.get("CLUSTER_NODES")):
        raise ImproperlyConfigured("MCP_TRANSPORT['REDIS'] names either SENTINELS (with MASTER_NAME) or CLUSTER_NODES.")
    if spec.get("CLUSTER_NODES"):
        return RedisTarget("cluster", nodes=tuple((h, int(p)) for h, p in spec["CLUSTER_NODES"]), options=options)
    if not spec.get("MASTER_NAME"):
        raise ImproperlyConfigured("MCP_TRANSPORT['REDIS'] with SENTINELS needs MASTER_NAME.")
    return RedisTarget("sentinel", nodes=tuple((h, int(p)) for h, p in spec["SENTINELS"]), master=spec["MASTER_NAME"],
                       db=int(spec.get("DB", 0)), options=options,
                       sentinel_options=dict(spec.get("SENTINEL_OPTIONS") or {}))


@functools.cache
def redis_target() -> RedisTarget:
    """Where this app's Redis is (see the module's docstring for the order of the settings).
    Read once: ``keys()`` asks on every call whether this is a Cluster."""
    config = get_config()
    if config.get("REDIS"):
        return structured_target(config["REDIS"])
    if not config["REDIS_URL"]:
        cache = settings.CACHES.get(config["CACHE_ALIAS"], {})
        sentinels = (cache.get("OPTIONS") or {}).get("SENTINELS")
        if sentinels:  # django-redis's Sentinel client: LOCATION is redis://MASTER_NAME/DB
            master, _, db = redis_url().partition("://")[2].partition("/")
            return RedisTarget("sentinel", nodes=tuple((h, int(p)) for h, p in sentinels), master=master,
                               db=int(db or 0), sentinel_options=dict(cache["OPTIONS"].get("SENTINEL_KWARGS") or {}))
    return parse_redis_url(redis_url())


@receiver(setting_changed)
def _forget_target(*, setting, **kwargs):
    if setting in ("MCP_TRANSPORT", "CACHES"):
        redis_target.cache_clear()


def is_cluster() -> bool:
    return redis_target().kind == "cluster"
