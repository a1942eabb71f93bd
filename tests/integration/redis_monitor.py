"""The commands a Redis receives while a test's calls run, as MONITOR sees them (the round-trip
tests: test_round_trips.py, test_shared_clients.py)."""
import threading

import redis


class Monitor:
    """The commands clients send to a Redis between ``start()`` and ``stop()``, as MONITOR
    sees them: one marker command from this monitor's own client opens and closes the count."""

    def __init__(self, url):
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.commands = []
        self._ready = threading.Event()

    def start(self):
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "MONITOR did not start"
        self.client.echo("round-trips:start")

    def stop(self) -> list:
        self.client.echo("round-trips:stop")
        self._thread.join(30)
        assert not self._thread.is_alive(), "MONITOR never saw the closing marker"
        return self.commands

    def _watch(self):
        with self.client.monitor() as monitor:
            self._ready.set()
            started = False
            for command in monitor.listen():
                text = command["command"]
                if text == "ECHO round-trips:start":
                    started = True
                elif text == "ECHO round-trips:stop":
                    return
                elif started and command.get("client_type") != "lua":
                    self.commands.append(text)


def count(own_redis, calls) -> list:
    monitor = Monitor(own_redis.url)
    monitor.start()
    try:
        calls()
    finally:
        commands = monitor.stop()
    return commands
