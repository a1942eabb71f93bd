"""Publishing on a channel, sharded on a Redis Cluster."""
from .targets import is_cluster


def publish(client, channel: str, message) -> None:
    """PUBLISH on a client or pipeline, SPUBLISH on a Cluster: a sharded channel's message goes
    to the nodes of its slot only, where a plain one crosses the whole Cluster bus
    (``state/bell.py`` subscribes with SSUBSCRIBE there). Returns what the call returns."""
    return (client.spublish if is_cluster() else client.publish)(channel, message)
