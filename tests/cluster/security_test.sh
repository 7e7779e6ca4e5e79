#!/usr/bin/env bash
# TLS on every stream and the cluster token, with the real binaries: a worker with the
# right CA and token trains; a wrong token, a missing token and a plaintext worker are all
# refused with a clear error, and the server is not disturbed by them.
set -uo pipefail

SERVER=server/p3_server
WORKER=worker/p3_worker
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

bash tools/make_test_certs.sh "$TMP/certs" p3-server || { echo "FAIL: cannot make certificates"; exit 1; }
echo "wrong-token" > "$TMP/wrong_token"

config() {  # $1 = file, $2 = token file ("": none), $3 = "tls" or "plain"
  local tls="" token=""
  [ -z "$2" ] || token="token_file: \"$2\""
  if [ "$3" = tls ]; then
    tls="tls_cert: \"$TMP/certs/server.pem\" tls_key: \"$TMP/certs/server.key\""
    tls+=" tls_ca: \"$TMP/certs/ca.pem\" tls_server_name: \"p3-server\""
  fi
  cat > "$1" <<CFG
name: "security"
mode: "p3"
cluster { workers: 1 servers: 1 peer_timeout_s: 5 }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 256 }
training { batch_size: 8 iterations: 5 evaluate: false log_every: 1 }
security { $token $tls }
CFG
}

config "$TMP/server.textproto" "$TMP/certs/token" tls
"$SERVER" --config="$TMP/server.textproto" --port_file="$TMP/port" > "$TMP/server.log" 2>&1 &
pids+=($!)
server_pid=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
address="127.0.0.1:$(cat "$TMP/port")"

run_worker() {  # $1 = config, $2 = log; returns the worker's exit code (124: timed out)
  timeout 60 "$WORKER" --config="$1" --rank=0 --servers="$address" > "$2" 2>&1
}

# expect_refused NAME: runs the worker of $TMP/NAME.textproto, which must be refused:
# exit non-zero, and within the bound (timeout's 124 means it hung).
expect_refused() {
  run_worker "$TMP/$1.textproto" "$TMP/$1.log"
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    fail "$1: the worker was accepted"
  elif [ "$rc" -eq 124 ]; then
    fail "$1: the worker hung (killed after 60 s)"
  fi
}

config "$TMP/wrong.textproto" "$TMP/wrong_token" tls
expect_refused wrong
grep -q "UNAUTHENTICATED.*token" "$TMP/wrong.log" || { fail "wrong token: no clear error"; cat "$TMP/wrong.log"; }

# No token_file at all: the worker's Hello carries no token.
config "$TMP/missing.textproto" "" tls
expect_refused missing
grep -q "UNAUTHENTICATED: server 0 .*worker 0 refused: missing or wrong cluster token" "$TMP/missing.log" ||
  { fail "missing token: no clear error"; cat "$TMP/missing.log"; }

config "$TMP/plain.textproto" "$TMP/certs/token" plain
expect_refused plain
grep -q "server 0" "$TMP/plain.log" || { fail "plaintext worker: no error naming the server"; cat "$TMP/plain.log"; }

kill -0 "$server_pid" 2>/dev/null || fail "the server died after refusing bad workers"

config "$TMP/good.textproto" "$TMP/certs/token" tls
run_worker "$TMP/good.textproto" "$TMP/good.log" || { fail "the right worker failed"; cat "$TMP/good.log"; }
grep -q "PROGRESS iteration=5 " "$TMP/good.log" || fail "the right worker did not train 5 iterations"
wait "$server_pid" || fail "the server did not finish cleanly"

for f in wrong missing plain; do echo "$f: $(grep -m1 p3_worker "$TMP/$f.log")"; done
echo "$failures failures"
[ "$failures" -eq 0 ]
