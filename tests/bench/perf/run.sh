#!/usr/bin/env bash
# Client CPU benchmark: builds the mock server and drivers, starts the server pinned to
# SERVER_CPU, runs every driver pinned to CLIENT_CPU in interleaved rounds (round 0 is a
# warm-up and is not counted), and prints a table (report.py). See README.md.
# ullm's in-tree copy of ../shared/perf/run.sh: no Node drivers; adds the Gemini (gem-*) and
# OpenAI Responses (rsp-*) scenarios.
#
# Knobs (environment):
#   ROUNDS=5 K_UNARY=2000 K_STREAM=300 N_EVENTS=200
#   SCENARIOS="oai-unary oai-stream ant-unary ant-stream gem-unary gem-stream rsp-unary rsp-stream"
#   DRIVERS="raw-libcurl"                                        (built-ins to run)
#   EXTRA_DRIVERS="name=/abs/path/to/binary [args];name2=..."    (more drivers, same CLI)
#   ULLM_PREFIX=/install/prefix   build drivers/ullm_driver.cpp with find_package(ullm), run it
#   WRITES=1 GAP_US=0        server: HTTP chunks per stream and pause between them (µs)
#   SERVER_CPU=0 CLIENT_CPU=1 JOBS=2 (build jobs) WORKDIR=... OUT=$WORKDIR/results/<timestamp>
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }   # relative to the caller's cwd
[ -z "${WORKDIR:-}" ] || WORKDIR=$(abs "$WORKDIR")
[ -z "${OUT:-}" ] || OUT=$(abs "$OUT")
cd "$HERE"

ROUNDS=${ROUNDS:-5}
K_UNARY=${K_UNARY:-2000}
K_STREAM=${K_STREAM:-300}
N_EVENTS=${N_EVENTS:-200}
ALL_SCENARIOS="oai-unary oai-stream ant-unary ant-stream gem-unary gem-stream rsp-unary rsp-stream"
SCENARIOS=${SCENARIOS:-$ALL_SCENARIOS}
DRIVERS=${DRIVERS:-"raw-libcurl"}
EXTRA_DRIVERS=${EXTRA_DRIVERS:-}
ULLM_PREFIX=${ULLM_PREFIX:-}
WRITES=${WRITES:-1}
GAP_US=${GAP_US:-0}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
JOBS=${JOBS:-2}
# Everything written goes under WORKDIR, so the folder itself may be read-only.
WORKDIR=${WORKDIR:-${TMPDIR:-/tmp}/ullm-perf}
OUT=${OUT:-$WORKDIR/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export NO_PROXY='*' no_proxy='*'

# ---------------------------------------------------------------- drivers
# name -> command, and the scenarios a built-in supports (extras: all; exit 3 = unsupported).
declare -A CMD SUPPORTS
CMD[raw-libcurl]="$WORKDIR/build/curl_driver";                 SUPPORTS[raw-libcurl]="$ALL_SCENARIOS"
ORDER=()
for d in $DRIVERS; do
  [ -n "${CMD[$d]:-}" ] || { echo "unknown driver $d (built-in: ${!CMD[*]}; use EXTRA_DRIVERS)" >&2; exit 2; }
  ORDER+=("$d")
done
if [ -n "$ULLM_PREFIX" ]; then
  CMD[ullm]="$WORKDIR/build/ullm_driver"; SUPPORTS[ullm]="$SCENARIOS"; ORDER+=(ullm)
fi
if [ -n "$EXTRA_DRIVERS" ]; then
  IFS=';' read -ra extras <<<"$EXTRA_DRIVERS"
  for e in "${extras[@]}"; do
    [ -n "$e" ] || continue
    name=${e%%=*}; CMD[$name]=${e#*=}; SUPPORTS[$name]="$SCENARIOS"; ORDER+=("$name")
  done
fi

# ---------------------------------------------------------------- build
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DULLM_DRIVER=OFF)
[ -z "$ULLM_PREFIX" ] || cmake_args=(-DCMAKE_BUILD_TYPE=Release -DULLM_DRIVER=ON "-DCMAKE_PREFIX_PATH=$ULLM_PREFIX")
cmake -S . -B "$WORKDIR/build" "${cmake_args[@]}" >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
cmake --build "$WORKDIR/build" -j"$JOBS" >>"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }

# ---------------------------------------------------------------- server
taskset -c "$SERVER_CPU" "$WORKDIR/build/mock_server" --port 0 --events "$N_EVENTS" \
  --writes "$WRITES" --gap-us "$GAP_US" >"$OUT/server.out" 2>&1 &
SPID=$!
trap 'kill "$SPID" 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q '^PORT ' "$OUT/server.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(awk '/^PORT /{print $2}' "$OUT/server.out")
[ -n "$PORT" ] || { echo "server did not start"; cat "$OUT/server.out"; exit 1; }
server_ns() { awk '{print $1}' "/proc/$SPID/schedstat"; }   # ns on CPU so far

echo "server pid $SPID port $PORT (cpu $SERVER_CPU), drivers on cpu $CLIENT_CPU, rounds 1 warm-up + $ROUNDS" >&2
RES="$OUT/results.jsonl"
: >"$RES"
n_drivers=${#ORDER[@]}
for ((r = 0; r <= ROUNDS; r++)); do
  for sc in $SCENARIOS; do
    case $sc in *stream*) k=$K_STREAM ;; *) k=$K_UNARY ;; esac
    for ((j = 0; j < n_drivers; j++)); do
      d=${ORDER[$(((j + r) % n_drivers))]}          # rotate the order each round
      case " ${SUPPORTS[$d]} " in *" $sc "*) ;; *) continue ;; esac
      t0=$(server_ns); p0=$(date +%s%N)
      set +e
      line=$(taskset -c "$CLIENT_CPU" ${CMD[$d]} --port "$PORT" --scenario "$sc" --k "$k" --n "$N_EVENTS" \
               2>>"$OUT/drivers.stderr" | tail -1)
      rc=$?
      set -e
      t1=$(server_ns); p1=$(date +%s%N)
      if [ "${line:0:1}" != "{" ]; then line="{\"driver\":\"$d\",\"scenario\":\"$sc\",\"ok\":false,\"error\":\"no output, rc $rc\"}"; fi
      case $line in *'"unsupported":true'*) SUPPORTS[$d]=${SUPPORTS[$d]/$sc/}; continue ;; esac
      srv=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.6f", (b-a)/1e9}')
      pw=$(awk -v a="$p0" -v b="$p1" 'BEGIN{printf "%.6f", (b-a)/1e9}')
      echo "{\"round\":$r,\"name\":\"$d\",\"server_cpu_s\":$srv,\"proc_wall_s\":$pw,${line:1}" >>"$RES"
      printf 'round %d %-10s %-16s %s\n' "$r" "$sc" "$d" "$(echo "$line" | cut -c1-160)" >&2
    done
  done
done

{
  echo "# $(date -u +%FT%TZ) rounds=$ROUNDS K_UNARY=$K_UNARY K_STREAM=$K_STREAM N=$N_EVENTS WRITES=$WRITES GAP_US=$GAP_US"
  echo "# $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(curl-config --version 2>/dev/null || true); loadavg $(cut -d' ' -f1-3 /proc/loadavg)${ULLM_PREFIX:+; ullm from $ULLM_PREFIX}"
  python3 "$HERE/report.py" "$RES"
} | tee "$OUT/table.md"
