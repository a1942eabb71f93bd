#!/usr/bin/env bash
# Run the official MCP conformance suites against the full stack started by scripts/run.py, then
# require the exact expected score of each leg via scripts/conformance_summary.py. Used by
# `make conformance` (which runs npm ci). Both harnesses are pinned in package.json:
#   @modelcontextprotocol/conformance 0.1.16                --suite all                 47/0/0
#   conformance-next = the same package at 0.2.0-alpha.12   --spec-version 2025-11-25   84/0/0
#                                                           --spec-version 2026-07-28   152/0/0
#                                                           each tasks-* scenario       44/0/0
#                                                           each sep-2640-skills-* one, 43/0/0
#                                                             --spec-version 2025-11-25 (the two
#                                                             cache checks SKIPPED: 2026 only)
#                                                             and 2026-07-28            45/0/0
#                                                           authorization (the AS)       3/0/0
# A leg may name a baseline (scripts/conformance/expected-*.yml) listing what is not done yet: the
# harness then fails on any FAILURE or WARNING outside it and on a listed scenario that passes.
# No leg has one now.
#
#   CONFORMANCE_PORT  port to serve on (default: a free one)
#   REDIS_URL         Redis to use (default: run.py starts an embedded one)
#   REDIS_TOPOLOGY    sentinel or cluster: run.py starts a private Sentinel set or Redis Cluster
#                     instead (the Cluster's broker: CELERY_BROKER_URL, default local RabbitMQ)
#   CONFORMANCE_LEGS  the legs to run, by name, space-separated (default: every leg); names:
#                     0.1.16-all 0.2.0-2025-11-25 0.2.0-2026-07-28 0.2.0-tasks 0.2.0-skills-2025-11-25
#                     0.2.0-skills-2026-07-28 0.2.0-authorization
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
# Every scenario is one client address (127.0.0.1): the per-caller rates stay off unless set.
PORT=$port MCP_REQUEST_RATE_LIMIT=${MCP_REQUEST_RATE_LIMIT:-off} MCP_SESSION_OPEN_RATE=${MCP_SESSION_OPEN_RATE:-off} \
    "$PYTHON" scripts/run.py >"$log" 2>&1 &
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

# npx puts node_modules/.bin first on PATH, so the harnesses run under the pinned Node 22
# (they crash at import under Node 20). --no-install: never fetch anything here.
echo "conformance: harness under node $(npx --no-install node --version)"
NEXT=node_modules/conformance-next/dist/index.js
TASKS_SCENARIOS=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
                 tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications
                 tasks-required-task-error tasks-mrtr-composition)
# SEP-2640's server scenarios (the io.modelcontextprotocol/skills extension): run only when named.
SKILLS_SCENARIOS=(sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory)
failed=()
legs=" ${CONFORMANCE_LEGS:-0.1.16-all 0.2.0-2025-11-25 0.2.0-2026-07-28 0.2.0-tasks 0.2.0-skills-2025-11-25 \
0.2.0-skills-2026-07-28 0.2.0-authorization} "
wanted() { [[ $legs == *" $1 "* ]]; }

# leg NAME SUCCESS BASELINE -- HARNESS-ARGS...: one harness run into its own folder, then its tally.
# SUCCESS is the exact count of SUCCESS checks outside the baseline ("-": no baseline).
leg() {
    local name=$1 success=$2 baseline=$3; shift 4
    local dir=$out/$name harness_rc=0 summary_rc=0 args=()
    wanted "$name" || return 0
    [[ $baseline != - ]] && args=(--expected-failures "$baseline")
    echo "=== conformance leg $name"
    "$@" --url "$url" -o "$dir" "${args[@]}" || harness_rc=$?
    "$PYTHON" scripts/conformance_summary.py "$dir" --success "$success" "${args[@]}" || summary_rc=$?
    ((harness_rc || summary_rc)) && failed+=("$name (harness exit $harness_rc, summary exit $summary_rc)")
    return 0
}

# The 10 tasks-* scenarios are an extension: only --scenario (or a plain --suite all) runs them.
# tasks-status-notifications only reports SKIPPED (its harness is pending a rewrite).
tasks_leg() {
    local scenario rc=0
    for scenario in "${TASKS_SCENARIOS[@]}"; do
        npx --no-install node "$NEXT" server --scenario "$scenario" "$@" || rc=1
    done
    return $rc
}

# skills_leg VERSION: each SEP-2640 scenario with that era's client (2025-11-25: initialize and a
# session; 2026-07-28: stateless requests). An extension's scenario is "not on the spec timeline":
# --force runs it at a --spec-version.
skills_leg() {
    local version=$1 scenario rc=0
    shift
    for scenario in "${SKILLS_SCENARIOS[@]}"; do
        npx --no-install node "$NEXT" server --scenario "$scenario" --spec-version "$version" --force "$@" || rc=1
    done
    return $rc
}

leg 0.1.16-all 47 - -- npx --no-install conformance server --suite all
leg 0.2.0-2025-11-25 84 - -- npx --no-install node "$NEXT" server --suite all --spec-version 2025-11-25
leg 0.2.0-2026-07-28 152 - -- \
    npx --no-install node "$NEXT" server --suite all --spec-version 2026-07-28
leg 0.2.0-tasks 44 - -- tasks_leg
leg 0.2.0-skills-2025-11-25 43 - -- skills_leg 2025-11-25
leg 0.2.0-skills-2026-07-28 45 - -- skills_leg 2026-07-28
# The authorization server (mcp_transport.oauth): authorization-server-metadata-endpoint (2 checks)
# and authorization-code-grant (1), the harness's consent step done by a scripted browser.
if wanted 0.2.0-authorization; then
    echo "=== conformance leg 0.2.0-authorization"
    "$PYTHON" scripts/conformance_authorization.py "http://127.0.0.1:$port" "$url" "$out/0.2.0-authorization" ||
        failed+=("0.2.0-authorization")
fi

if ((${#failed[@]})); then
    fail "legs that failed: ${failed[*]}"
fi
echo "conformance: all legs OK ($(echo $legs))"
