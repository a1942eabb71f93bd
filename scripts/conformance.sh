#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json,
# all 32 server scenarios) against the full stack started by scripts/run.py, then require the exact
# expected score via scripts/conformance_summary.py. Used by `make conformance` (which runs npm ci).
#
#   CONFORMANCE_PORT  port to serve on (default: a free one)
#   REDIS_URL         Redis to use (default: run.py starts an embedded one)
#   PYTHON            interpreter with the project installed (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
port=${CONFORMANCE_PORT:-$("$PYTHON" -c 'from mcpserver.embedded_redis import free_port; print(free_port())')}
url=http://127.0.0.1:$port/mcp
# A fresh folder per run: the harness never overwrites, it adds timestamped folders per scenario.
mkdir -p conformance-results
out=$(mktemp -d "conformance-results/$(date +%Y%m%d-%H%M%S).XXXX")
log=$out/server.log
server_pid=

cleanup() {
    [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null || return 0
    # run.py forwards SIGTERM to daphne/celery and stops its Redis; give it up to 20 s.
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || return 0; sleep 0.2; done
    echo "server stack did not stop; killing it" >&2
    kill -KILL -- "-$server_pid" 2>/dev/null || true  # its children get SIGTERM from the kernel
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
    echo "conformance: $*" >&2
    echo "----- server log (last 80 lines of $log) -----" >&2
    tail -n 80 "$log" >&2 || true
    exit 1
}

# The harness neither starts nor stops the server; refuse to test someone else's.
if curl -s -o /dev/null --max-time 2 "$url"; then
    echo "conformance: something already answers on $url; set CONFORMANCE_PORT" >&2
    exit 1
fi

# set -m: the stack gets its own process group, so cleanup can signal all of it and a Ctrl-C on
# this script reaches only this script.
set -m
PORT=$port "$PYTHON" scripts/run.py >"$log" 2>&1 &
server_pid=$!
set +m

# Ready = any HTTP answer (a bare GET gets 4xx from a healthy Streamable HTTP endpoint).
deadline=$((SECONDS + 60))
until curl -s -o /dev/null --max-time 2 "$url"; do
    kill -0 "$server_pid" 2>/dev/null || fail "server stack exited before answering on $url"
    ((SECONDS < deadline)) || fail "no answer on $url after 60 s"
    sleep 0.5
done
echo "conformance: server up on $url; results in $out"

# npx puts node_modules/.bin first on PATH, so the harness runs under the pinned Node 22
# (it crashes at import under Node 20). --no-install: never fetch anything here.
echo "conformance: harness under node $(npx --no-install node --version)"
harness_rc=0
npx --no-install conformance server --url "$url" --suite all -o "$out" || harness_rc=$?

summary_rc=0
"$PYTHON" scripts/conformance_summary.py "$out" || summary_rc=$?
if ((harness_rc || summary_rc)); then
    fail "harness exit $harness_rc, summary exit $summary_rc"
fi
