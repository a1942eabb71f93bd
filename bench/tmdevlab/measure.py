"""What a round of bench/tmdevlab/run.py measures besides the load's own counts: the CPU each process
of the round spent in the counted window (the server, the API, the load, the Redis servers), what
else ran on the server's core meanwhile, and the API's latency as a client sees it then.

On a shared machine a pinned server gets only what the others leave of its core, so iterations a
second move with the neighbours; the server's CPU milliseconds an iteration do not (much), and
"others on the server's core" says when a round was squeezed.
"""
import http.client
import os
import statistics
import threading
import time
import urllib.parse

CLK_TCK = os.sysconf("SC_CLK_TCK")
SEARCH = "/products/search?category=Electronics&min_price=50.0&max_price=500.0&limit=10"


def cpu_seconds(pid):
    """User + system CPU seconds of a process and all its threads so far, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def core_ticks(core):
    """(busy, total) clock ticks of one core so far, from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{core} "):
                ticks = [int(value) for value in line.split()[1:9]]
                return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy
    return 0, 0


def core_busy_pct(core, seconds=2.0) -> float:
    """How busy one core is over the next `seconds` (percent)."""
    busy, total = core_ticks(core)
    time.sleep(seconds)
    busy_after, total_after = core_ticks(core)
    return round(100 * (busy_after - busy) / max(1, total_after - total), 1)


class Snapshot:
    def __init__(self, pids: dict, core: int):
        self.at = time.monotonic()
        self.cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.core = core_ticks(core)


def usage(before: Snapshot, after: Snapshot) -> dict:
    """{name_cpu_pct} of each process between two snapshots, and others_on_core_pct: the share of the
    server's core that went to anything but the server (other users of the machine, mostly)."""
    seconds = after.at - before.at
    result = {f"{name}_cpu_pct": round(100 * (after.cpu[name] - before.cpu[name]) / seconds, 1)
              for name in before.cpu if before.cpu[name] is not None and after.cpu[name] is not None}
    busy, total = (a - b for a, b in zip(after.core, before.core))
    if total and "server_cpu_pct" in result:
        result["others_on_core_pct"] = max(0.0, round(100 * busy / total - result["server_cpu_pct"], 1))
    result["window_s"] = round(seconds, 2)
    return result


class ApiProbe(threading.Thread):
    """GET the benchmark's search from the API every `interval` s over one kept-alive connection, as
    the servers' clients do, and keep the latencies: is the API quick while the servers use it?"""

    def __init__(self, base_url, interval=0.1):
        super().__init__(daemon=True)
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port, self.interval = parts.hostname, parts.port, interval
        self.latencies, self.failures = [], 0
        self.done = threading.Event()

    def run(self):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=5)
        while not self.done.wait(self.interval):
            started = time.perf_counter()
            try:
                connection.request("GET", SEARCH)
                response = connection.getresponse()
                response.read()
                self.latencies.append(time.perf_counter() - started)
            except (OSError, http.client.HTTPException):
                self.failures += 1
                connection.close()
        connection.close()

    def stop(self) -> dict:
        self.done.set()
        self.join()
        ordered = sorted(self.latencies)
        if not ordered:
            return {"api_ms_p50": None, "api_ms_p99": None, "api_probe_failures": self.failures}
        return {"api_ms_p50": round(statistics.median(ordered) * 1000, 2),
                "api_ms_p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 2),
                "api_probe_failures": self.failures}
