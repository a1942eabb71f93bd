"""Throwaway Redis Sentinel sets and Redis Clusters on free ports, for the tests and
``scripts/conformance.sh`` (``python -m mcpserver.redis_topologies sentinel|cluster`` prints the
REDIS_URL and runs until interrupted).

Like ``embedded_redis``: real redis-server processes (the one on PATH: sharded pub/sub needs
Redis 7), 127.0.0.1, temp dirs, no persistence. A Sentinel set is a master, a replica and three
Sentinels (quorum 2, a dead master is replaced in about 3 s); a Cluster is three masters with one
replica each. ``kill_master()`` kills the current master (after every replica is in sync, since
a replica that never synced does not take over) and waits until a replica took its place.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .embedded_redis import free_port, ping, set_parent_death_signal

__all__ = ["SentinelSet", "RedisClusterSet"]


def _executable():
    path = shutil.which("redis-server")
    if not path:
        raise RuntimeError("redis-server (7.0 or later) is not on PATH")
    return path


def command(port, *args, host="127.0.0.1", timeout=2.0):
    """One command on a Redis (or Sentinel) over a raw socket; the reply as text (RESP, unparsed)."""
    payload = f"*{len(args)}\r\n" + "".join(f"${len(str(a).encode())}\r\n{a}\r\n" for a in args)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(payload.encode())
        data = b""
        s.settimeout(0.3)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if data:
                    break
                continue
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")


def _wait(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


class _Processes:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="redis-topology-")
        self.processes = {}  # port -> Popen

    def spawn(self, port, *args, config=None):
        workdir = os.path.join(self.dir, str(port))
        os.makedirs(workdir, exist_ok=True)
        argv = [_executable()]
        if config is not None:
            path = os.path.join(workdir, "sentinel.conf")
            with open(path, "w") as f:
                f.write(config)
            argv += [path, "--sentinel"]
        argv += ["--bind", "127.0.0.1", "--port", str(port), "--dir", workdir, "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--logfile", os.path.join(workdir, "log"), *args]
        self.processes[port] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL, process_group=0,
                                                # They go with the process that started them, even a killed one.
                                                preexec_fn=set_parent_death_signal)
        _wait(lambda: ping("127.0.0.1", port), 15, f"redis-server on port {port}")

    def kill(self, port):
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def stop(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


def _ports(count, below=55536):
    ports = set()
    while len(ports) < count:
        port = free_port()
        if port < below:  # a Cluster's bus port is PORT + 10000
            ports.add(port)
    return sorted(ports)


def _info(port, section="replication"):
    return dict(line.split(":", 1) for line in command(port, "INFO", section).splitlines() if ":" in line)


class SentinelSet:
    """A master, a replica, three Sentinels monitoring ``master_name``."""

    def __init__(self, master_name="mymaster"):
        self.master_name = master_name
        self.procs = _Processes()
        self.data_ports, self.sentinel_ports = [], []

    @property
    def url(self):
        nodes = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{nodes}/{self.master_name}/0"

    def start(self):
        master, replica, *sentinels = _ports(5)
        self.data_ports, self.sentinel_ports = [master, replica], sentinels
        self.procs.spawn(master, "--repl-diskless-sync-delay", "0")
        self.procs.spawn(replica, "--replicaof", "127.0.0.1", str(master), "--repl-diskless-sync-delay", "0")
        for port in sentinels:
            self.procs.spawn(port, config=(
                f"sentinel monitor {self.master_name} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {self.master_name} 2000\n"
                f"sentinel failover-timeout {self.master_name} 10000\n"
                f"sentinel parallel-syncs {self.master_name} 1\n"))
        self.wait_in_sync()
        _wait(lambda: all(self._others(port) == 2 for port in sentinels), 30, "the Sentinels to find each other")
        return self

    def _others(self, port):
        reply = command(port, "SENTINEL", "SENTINELS", self.master_name)
        return reply.count("runid")

    def master_port(self):
        reply = command(self.sentinel_ports[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        return int(reply.split("\r\n")[-2])

    def wait_in_sync(self, timeout=180):
        """Until every live replica's link to the master is up."""
        def synced():
            master = self.master_port() if self.sentinel_ports and self.procs.processes.get(self.sentinel_ports[0]) \
                else self.data_ports[0]
            replicas = [p for p in self.data_ports if p != master and p in self.procs.processes]
            return all(_info(p).get("master_link_status", "").strip() == "up" for p in replicas)
        _wait(synced, timeout, "the replicas' master_link_status:up")

    def kill_master(self, timeout=30):
        """Kill the master; returns once the Sentinels promoted the replica."""
        self.wait_in_sync()
        old = self.master_port()
        self.procs.kill(old)
        _wait(lambda: self.master_port() != old, timeout, "a Sentinel failover")
        new = self.master_port()
        _wait(lambda: _info(new).get("role", "").strip() == "master", timeout, "the new master")
        return old, new

    def restart(self, port):
        """Start a killed data node again, as a replica of the current master."""
        self.procs.spawn(port, "--replicaof", "127.0.0.1", str(self.master_port()), "--repl-diskless-sync-delay", "0")

    def stop(self):
        self.procs.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class RedisClusterSet:
    """Three masters with one replica each."""

    def __init__(self, nodes=6):
        self.procs = _Processes()
        self.count = nodes
        self.ports = []

    @property
    def url(self):
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self):
        self.ports = _ports(self.count)
        for port in self.ports:
            self._spawn(port)
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        subprocess.run([shutil.which("redis-cli"), "--cluster", "create", *nodes, "--cluster-replicas", "1",
                        "--cluster-yes"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        _wait(lambda: all("cluster_state:ok" in command(port, "CLUSTER", "INFO") for port in self.ports), 60,
              "cluster_state:ok on every node")
        self.wait_in_sync()
        return self

    def _spawn(self, port):
        self.procs.spawn(port, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0")

    def masters(self):
        return [port for port in self.ports if port in self.procs.processes
                and _info(port).get("role", "").strip() == "master"]

    def wait_in_sync(self, timeout=180):
        def synced():
            replicas = [p for p in self.ports if p in self.procs.processes and _info(p).get("role", "").strip() == "slave"]
            return len(replicas) >= 1 and all(_info(p).get("master_link_status", "").strip() == "up" for p in replicas)
        _wait(synced, timeout, "the replicas' master_link_status:up")

    def master_of_slot(self, slot):
        for port in self.masters():
            for line in command(port, "CLUSTER", "NODES").splitlines():
                fields = line.split()
                if len(fields) >= 8 and "myself" in fields[2] and "master" in fields[2]:
                    for span in fields[8:]:
                        low, _, high = span.partition("-")
                        if low.isdigit() and int(low) <= slot <= int(high or low):
                            return port
        return None

    def kill_master(self, slot=0, timeout=60):
        """Kill the master of ``slot``; returns once a replica serves it and the Cluster is ok."""
        self.wait_in_sync()
        old = self.master_of_slot(slot)
        self.procs.kill(old)
        alive = [p for p in self.ports if p in self.procs.processes]
        _wait(lambda: (self.master_of_slot(slot) not in (None, old))
              and all("cluster_state:ok" in command(p, "CLUSTER", "INFO") for p in alive), timeout,
              "a Cluster failover")
        return old, self.master_of_slot(slot)

    def restart(self, port):
        """Start a killed node again: it rejoins (its nodes.conf is kept) as a replica."""
        self._spawn(port)
        _wait(lambda: "cluster_state:ok" in command(port, "CLUSTER", "INFO"), 60, "the node to rejoin")

    def stop(self):
        self.procs.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def key_slot(key: str) -> int:
    """The Cluster slot of a key (CRC16 of its hash tag), as redis-py computes it."""
    from redis.crc import key_slot as slot  # noqa: PLC0415

    return slot(key.encode())


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "sentinel"
    topology = (SentinelSet() if kind == "sentinel" else RedisClusterSet()).start()
    print(topology.url, flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        topology.stop()
