"""Celery's broker connection on a Redis or a Sentinel broker: kombu's Redis transports, with a
channel that closes whole on a connection that died (``RedisTransport``, ``SentinelTransport``).

kombu's Redis channel, when it closes, first reads the reply of the BRPOP it has in flight, so
that a message popped at that moment is not lost (kombu #1733). On a connection that died, that
read raises, and the close stops there: the channel stays open, with its unacknowledged messages
(a worker's running acks_late jobs, its delayed ones) still to put back. Celery's consumer, on a
lost broker connection, closes the connection twice: ``collect()``, whose close of the channel
fails as above and which then detaches the transport from its connection, and ``close()``, whose
close of the half-closed channel puts those messages back through a new connection pool built
from the detached transport's parameters: ``AttributeError: 'NoneType' object has no attribute
'hostname'`` (``_connparams``). Celery takes an AttributeError for unrecoverable and stops the
worker once its running jobs end; every job still queued behind them waits for a worker that
is gone. It takes a worker with a free slot (a BRPOP in flight) and an unacknowledged message
when Redis restarts or fails over, and the remote control's subscription noticing first: since
a caller's jobs over its share wait as delayed messages (running/jobs/submitting.py), that is
the usual case.

Here a BRPOP reply that can no longer come is not waited for, and the first close goes on to
the end as it does on a live connection (putting the messages back fails with a connection
error, which Celery ignores; Redis keeps them among its unacked ones, and a job's row decides
whether a redelivery runs: running/worker/run.py). The app selects these transports itself
(``ride_out_broker_losses``, from ``apps.py``) unless the project names a transport of its own.
"""
from kombu.transport import redis as kombu_redis

__all__ = ["RedisTransport", "SentinelTransport", "ride_out_broker_losses", "riding_transport"]

#: Broker URL schemes served by kombu's Redis transports, and the transport used instead.
RIDING_TRANSPORTS = {
    "redis": f"{__name__}:RedisTransport",
    "rediss": f"{__name__}:RedisTransport",
    "sentinel": f"{__name__}:SentinelTransport",
}


class _ClosesWhole:
    """A kombu Redis channel whose close does not stop at the reply of a BRPOP that a dead
    connection will never give."""

    def close(self):
        if self._in_poll:
            try:
                self._brpop_read()  # clears _in_poll, whatever it raises
            except kombu_redis.Empty:
                pass
            except self.connection_errors:
                pass  # the connection died: there is no reply to wait for
        super().close()


class RedisChannel(_ClosesWhole, kombu_redis.Channel):
    pass


class SentinelChannel(_ClosesWhole, kombu_redis.SentinelChannel):
    pass


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel


def riding_transport(*urls) -> str | None:
    """The transport (kombu's "module:Class" form) for broker URLs that all name a Redis or all a
    Sentinel set (``redis://``, ``rediss://``, ``sentinel://``; several, separated by ``;``, are
    failover alternates), else None (RabbitMQ, say: its transport does not have this fault)."""
    schemes = {part.strip().partition("://")[0] for url in urls if url for part in url.split(";") if part.strip()}
    transports = {RIDING_TRANSPORTS.get(scheme) for scheme in schemes}
    return transports.pop() if len(transports) == 1 else None


def ride_out_broker_losses(app) -> None:
    """Have the Celery ``app`` connect to a Redis or Sentinel broker through the transports
    above, unless the project names a transport (``CELERY_BROKER_TRANSPORT``) of its own."""
    conf = app.conf
    urls = [url for url in (conf.broker_url, conf.broker_read_url, conf.broker_write_url) if url]
    if conf.broker_transport or not all(isinstance(url, str) for url in urls):
        return
    transport = riding_transport(*urls)
    if transport:
        conf.broker_transport = transport
