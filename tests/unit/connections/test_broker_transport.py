"""The Celery broker transports of connections/broker.py: on a lost Redis connection a channel
closes whole, and Celery's two closes of the connection (the steps of its consumer's
``on_connection_error_after_connected``) end without the AttributeError that stopped the worker.
The processes of a real deployment are in tests/integration/test_redis_faults.py and
test_redis_topologies.py; here kombu alone, on a real redis-server."""
import socket

import pytest
from celery import Celery, current_app
from kombu import Connection, Exchange, Queue

from mcp_transport.connections.broker import ride_out_broker_losses, riding_transport
from mcpserver.embedded_redis import EmbeddedRedis

OURS = "mcp_transport.connections.broker:RedisTransport"
SENTINEL = "mcp_transport.connections.broker:SentinelTransport"


@pytest.fixture
def server():
    started = EmbeddedRedis().start()
    yield started
    started.stop()


def _consuming(connection):
    """The worker's state when Redis goes: a task message delivered and not acknowledged
    (acks_late), a BRPOP in flight on the task channel, and a second channel subscribed to a
    fanout exchange, as Celery's remote control (pidbox) is."""
    tasks = Queue("tasks", Exchange("tasks"), "tasks")
    connection.Producer().publish({"job": 1}, exchange=tasks.exchange, routing_key="tasks", declare=[tasks])
    delivered = []
    connection.Consumer([tasks], callbacks=[lambda body, message: delivered.append(message)],
                        prefetch_count=2).consume()
    connection.drain_events(timeout=5)
    control = Queue("control", Exchange("control", type="fanout"), auto_delete=True)
    connection.Consumer([control], channel=connection.channel(), callbacks=[lambda body, message: None]).consume()
    for _ in range(10):  # the subscription's confirmation, then nothing: the next BRPOP waits
        try:
            connection.drain_events(timeout=0.2)
        except socket.timeout:
            break
    assert len(delivered) == 1 and connection.default_channel._in_poll
    return connection.default_channel


def test_celery_closes_a_connection_whose_redis_went_away_without_an_attributeerror(server):
    connection = Connection(server.url, transport=OURS)
    task_channel = _consuming(connection)
    server.process.kill()  # the control channel's subscription noticed first, in the worker
    server.process.wait()
    connection.collect(socket_timeout=1)  # Celery's first close: the transport is detached after it
    assert task_channel.closed
    connection.close()  # its second: was AttributeError ('NoneType' object has no attribute 'hostname')


@pytest.mark.parametrize("urls, transport", [
    (["redis://127.0.0.1:6379/0"], OURS),
    (["rediss://:secret@redis.example.com:6380/1", None], OURS),
    (["sentinel://127.0.0.1:26379/0;sentinel://127.0.0.1:26380/0"], SENTINEL),
    (["amqp://guest:guest@127.0.0.1:5672//"], None),
    (["redis://127.0.0.1:6379/0", "amqp://guest@127.0.0.1//"], None),  # reads and writes apart
    ([None], None),
])
def test_a_redis_or_sentinel_broker_gets_the_riding_transport(urls, transport):
    assert riding_transport(*urls) == transport


def test_a_transport_the_project_names_stays():
    celery = Celery("own", set_as_current=False)
    celery.conf.broker_url, celery.conf.broker_transport = "redis://127.0.0.1:6379/0", "myproject.broker:Transport"
    ride_out_broker_losses(celery)
    assert celery.conf.broker_transport == "myproject.broker:Transport"


def test_the_running_projects_app_connects_through_it():
    with current_app.connection_for_read() as connection:
        assert type(connection.transport).__module__ == "mcp_transport.connections.broker"
