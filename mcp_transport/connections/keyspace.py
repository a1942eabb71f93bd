"""The names of every Redis key and channel of the app (``keys()``)."""
import hashlib

from ..conf import get_config
from .targets import is_cluster


def hash_tag(value: str) -> str:
    """``{value}``: on a Cluster only the part in braces decides a key's slot, so every key that
    carries the same tag lives on the same node (what one script or MULTI may touch)."""
    return "{" + value + "}"


class Keys:
    """Every Redis key and channel name, built in one place: ``{prefix}:{kind}:{session}[:...]``."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def session(self, session_id):
        return f"{self.prefix}:session:{session_id}"

    def stream(self, session_id, stream_key):
        return f"{self.prefix}:stream:{session_id}:{stream_key}"

    def stream_bell(self, session_id, stream_key):
        return f"{self.prefix}:bell:{session_id}:{stream_key}"

    def reader(self, session_id, stream_key):
        """Token of the connection that currently reads a stream (one per stream, any process)."""
        return f"{self.prefix}:reader:{session_id}:{stream_key}"

    def call(self, session_id, stream_key):
        """The request behind a POST stream: its id and its process's last heartbeat."""
        return f"{self.prefix}:call:{session_id}:{stream_key}"

    def opened_streams(self, session_id):
        """The streams of a session served over stdio or HTTP+SSE, in the order they were
        opened (transports/message_session.py)."""
        return f"{self.prefix}:opened:{session_id}"

    def closed(self, session_id):
        """Set when the session closes: its late events are not stored (storage/redis.py)."""
        return f"{self.prefix}:closed:{session_id}"

    def outbound_ids(self, session_id):
        return f"{self.prefix}:outid:{session_id}"

    def asked(self, session_id, request_id):
        """Set while the session's client may answer this request of ours (streams.deliver_reply)."""
        return f"{self.prefix}:asked:{session_id}:{request_id}"

    def reply(self, session_id, request_id):
        return f"{self.prefix}:reply:{session_id}:{request_id}"

    def parked(self, session_id, request_id):
        """The background job that gave its worker back until this request of ours is answered."""
        return f"{self.prefix}:parked:{session_id}:{request_id}"

    def job_answers(self, job_id):
        """The client's answers a parked job has had so far: a hash of the question's index in
        the call (the tool's ask count) -> ``{"result"}`` or ``{"error"}``."""
        return f"{self.prefix}:jobreplies:{job_id}"

    def job_asked(self, job_id):
        """The questions a parked job has sent: index -> ``{"id": request id, "digest", "until"}``
        (and ``"key"``, its inputRequests key, for a 2026-07-28 job)."""
        return f"{self.prefix}:jobasked:{job_id}"

    def held_waits(self, worker):
        """The jobs of one Celery worker waiting for a client in their slot: job id -> deadline."""
        return f"{self.prefix}:heldwaits:{worker}"

    def waiting_sweep(self):
        """Where the cleanup's sweep of waiting jobs stopped: "<updated_at> <job id>"
        (running/jobs/sweep.py)."""
        return f"{self.prefix}:sweep:waiting"

    def listen_bell(self):
        """Every list_changed / resources/updated, for the 2026-07-28 subscriptions/listen streams."""
        return f"{self.prefix}:listen"

    def control_channel(self):
        return f"{self.prefix}:control"

    def tools_off(self):
        """The set of the tools an operator switched off (state/switches.py)."""
        return f"{self.prefix}:toolsoff"

    def metrics(self):
        return f"{self.prefix}:metrics"

    def histograms(self):
        """The duration histograms' buckets and sums of every process: state/histograms.py."""
        return f"{self.prefix}:histograms"

    def open_streams(self, process_id):
        return f"{self.prefix}:openstreams:{process_id}"

    def session_counters(self, session_id):
        """A session's own counters (resumes, replays): metrics.py."""
        return f"{self.prefix}:sesscount:{session_id}"

    def samples(self):
        """The dashboard's samples of the counters over time, newest first: samples.py."""
        return f"{self.prefix}:samples"

    def sample_lock(self):
        return f"{self.prefix}:samples:lock"

    def address_sessions(self, address):
        """Sorted set of the ids of sessions opened from one client address (quotas.py)."""
        return f"{self.prefix}:addrsess:{address}"

    def session_openings(self, address):
        """When an address's bucket of session openings is full again (SESSION_OPEN_RATE, quotas.py)."""
        return f"{self.prefix}:addropen:{address}"

    def request_rate(self, caller):
        """When a caller's (``caller:<digest>``) bucket of requests is full again
        (REQUEST_RATE_LIMIT, state/request_rates.py)."""
        return f"{self.prefix}:reqrate:{caller}"

    def replayed(self, caller):
        """Bytes replayed to a caller (``caller:<digest>``) in the current window (quotas.py)."""
        return f"{self.prefix}:replayed:{caller}"

    def rate(self, caller, tool=""):
        """Sorted set of the tools/call requests a caller (``caller:<digest>``) made in the last
        window of its rate limit, or of one tool's own (state/rates.py)."""
        return f"{self.prefix}:rate:{caller}:{tool}" if tool else f"{self.prefix}:rate:{caller}"

    def calls(self, session_id):
        """Sorted set of the requests and background jobs of a session (or of a 2026-07-28 caller,
        ``caller:<digest>``) running now, scored by when they expire (quotas.py)."""
        return f"{self.prefix}:calls:{session_id}"

    def job_slot(self, job_id):
        """The running-calls set (``calls``) a background job counts in, until it ends (quotas.py)."""
        return f"{self.prefix}:jobslot:{job_id}"

    def subscriptions(self, session_id):
        """The resource URIs a session subscribed to."""
        return f"{self.prefix}:subs:{session_id}"

    def auth_token(self, digest):
        """A token's cached validation result (auth/), by the token's SHA-256."""
        return f"{self.prefix}:auth:{digest}"

    def auth_failures(self, network):
        """Failed token lookups from one client network in the current window (auth/)."""
        return f"{self.prefix}:authfail:{network}"

    def uri_subscribers(self, uri):
        """The sessions subscribed to a resource URI (hashed: URIs are long and arbitrary)."""
        return f"{self.prefix}:urisubs:{hashlib.sha256(uri.encode()).hexdigest()[:32]}"


def keys() -> Keys:
    """The key names. On a Cluster the prefix is a hash tag (``{mcp}``): every key and channel of
    the app then lives in one slot, so every script (the event store's append touches the
    session's streams and the store's shared bookkeeping) and pipeline stays on one node, and a
    failover moves them all at once. TODO: per-session tags spread sessions over the Cluster's
    masters once the store keeps its bookkeeping per slot (docs/deployment.md)."""
    prefix = get_config()["KEY_PREFIX"]
    return Keys(hash_tag(prefix) if is_cluster() else prefix)
