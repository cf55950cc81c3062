#!/bin/sh
# Seeds and runs ullm's libFuzzer targets; CI's smoke run and long campaigns both use it (see
# tests/fuzz/README.md).
#
#   tests/fuzz/run.sh [-t SECONDS] [-n RUNS] [-j JOBS] [-c CORPUS_DIR] [-a ARTIFACT_DIR] BUILD_DIR [TARGET...]
#
#   -t SECONDS     fuzzing time per target (default 25; 0: no time limit)
#   -n RUNS        executions per target (default: unlimited); -n alone drops the time limit
#   -j JOBS        how many targets fuzz at a time, one process each (default 1)
#   -c CORPUS_DIR  keep each target's corpus in CORPUS_DIR/TARGET (default: a temporary
#                  directory, removed afterwards)
#   -a ARTIFACT_DIR  where crashing inputs and each target's log go (default:
#                  BUILD_DIR/fuzz-artifacts)
#   TARGET         sse_parser, ndjson_splitter, ..., cli_decode (default: all)
#
# ULLM_FUZZ_FLAGS adds libFuzzer flags (e.g. "-max_len=65536 -fork=2"); ASAN_OPTIONS and
# UBSAN_OPTIONS are passed on when set.
#
# For each target: first every saved input under tests/fuzz/regressions/TARGET is replayed,
# then the target fuzzes a corpus seeded from the recorded provider traffic in the fixtures
# folder (ULLM_FIXTURES_DIR, default ../shared/fixtures beside the checkout) and the small
# hand-written seeds in tests/fuzz/seeds. Exits non-zero when any replay or fuzzing run finds
# something: a crash, a sanitizer report, an exception other than ullm::Error, or a
# split/whole mismatch.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fixtures=${ULLM_FIXTURES_DIR:-$repo/../shared/fixtures}
all_targets="sse_parser ndjson_splitter json_array_splitter
openai_chat_decode openai_responses_decode anthropic_decode gemini_decode embedding_decode
openai_chat_stream openai_responses_stream anthropic_stream gemini_stream
snapshot validator partial_json fast_json cli_decode"

seconds=25
runs=""
jobs=1
time_given=""
corpus_root=""
artifacts=""
usage() {
    sed -n '5,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 64
}
while getopts t:n:j:c:a:h option; do
    case $option in
        t) seconds=$OPTARG; time_given=1 ;;
        n) runs=$OPTARG ;;
        j) jobs=$OPTARG ;;
        c) corpus_root=$OPTARG ;;
        a) artifacts=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
case $jobs in '' | *[!0-9]* | 0) usage ;; esac
build=$1
shift
targets=${*:-$all_targets}
if [ -n "$runs" ] && [ -z "$time_given" ]; then seconds=0; fi
artifacts=${artifacts:-$build/fuzz-artifacts}
mkdir -p "$artifacts"
artifacts=$(cd "$artifacts" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/ullm-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
if [ ! -f "$fixtures/README.md" ]; then
    echo "ullm fuzz: no fixtures at $fixtures (set ULLM_FIXTURES_DIR); seeding from" \
        "tests/fuzz/seeds only" >&2
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# --- Seeding -----------------------------------------------------------------------------------
# Every input starts with a 4-byte header (tests/fuzz/fuzz_support.hpp): options, chunking and
# a 16-bit seed. `put DIR OPTIONS CHUNKING N < payload` writes DIR/seed-N.

byte() {
    # shellcheck disable=SC2059
    printf "\\$(printf '%03o' "$1")"
}

put() {
    seed=$(($4 * 7919 % 65536))
    {
        byte "$2"
        byte "$3"
        byte $((seed % 256))
        byte $((seed / 256))
        cat
    } >"$1/seed-$4"
}

# Fixture files under $fixtures/DIR matching a name pattern, at most 16 KiB each (larger
# inputs slow the smoke run down more than they add).
fixture_files() {
    [ -d "$fixtures/$1" ] || return 0
    find "$fixtures/$1" -type f -name "$2" -size -17k | sort
}

# Payload framings of a *.chunks.txt recording (see the fixtures' README.md).
frame_data() { awk '{ printf "data: %s\n\n", $0 }' "$1"; }
frame_chat() {
    frame_data "$1"
    printf 'data: [DONE]\n\n'
}
frame_typed() {
    awk '{
        if (match($0, /"type" *: *"[^"]*"/)) {
            type = substr($0, RSTART, RLENGTH)
            sub(/^"type" *: *"/, "", type)
            sub(/"$/, "", type)
            printf "event: %s\n", type
        }
        printf "data: %s\n\n", $0
    }' "$1"
}
as_array() { awk 'BEGIN { printf "[" } NR > 1 { printf ",\n" } { printf "%s", $0 } END { print "]" }' "$1"; }

# pick N WORD...: word N modulo the number of words.
pick() {
    n=$(($1 % ($# - 1) + 2))
    eval "echo \${$n}"
}

count=0
# add DIR OPTIONS_LIST CHUNKING FRAMING FILE...: one seed per file, the options byte cycling
# through OPTIONS_LIST and, with CHUNKING "cycle", the chunking byte through 0..15.
add() {
    dir=$1 options_list=$2 chunking=$3 framing=$4
    shift 4
    for file in "$@"; do
        count=$((count + 1))
        # shellcheck disable=SC2086
        options=$(pick "$count" $options_list)
        [ "$chunking" = cycle ] && chunk=$((count % 16)) || chunk=$chunking
        case $framing in
            raw) put "$dir" "$options" "$chunk" "$count" <"$file" ;;
            *) "$framing" "$file" | put "$dir" "$options" "$chunk" "$count" ;;
        esac
    done
}

# The hand-written seeds of a target: payloads in tests/fuzz/seeds/TARGET, each given a header
# with options OPTIONS, or the options and chunking bytes its name gives as NAME@OPTIONS,CHUNKING.
# Validator seeds are pairs NAME.schema.json and NAME.args.json, joined by a record separator.
add_hand_written() {
    [ -d "$here/seeds/$2" ] || return 0
    for file in "$here/seeds/$2"/*; do
        [ -f "$file" ] || continue
        options=$3 chunk=0
        case $file in
            *@*,*)
                spec=${file##*@}
                spec=${spec%%.*}
                options=${spec%,*} chunk=${spec#*,}
                ;;
        esac
        count=$((count + 1))
        case $file in
            *.args.json) ;;
            *.schema.json)
                { cat "$file"; printf '\036'; cat "${file%.schema.json}.args.json"; } |
                    put "$1" "$options" "$chunk" "$count"
                ;;
            *) put "$1" "$options" "$chunk" "$count" <"$file" ;;
        esac
    done
}

# shellcheck disable=SC2046 # word splitting of file lists is intended (fixture names have no spaces)
seed() {
    dir=$1 target=$2
    case $target in
        sse_parser)
            add "$dir" "128 192 16 63" cycle raw $(fixture_files openai-chat/openai-python-sse '*.bin') \
                $(fixture_files anthropic/anthropic-sdk-python '*.txt') \
                $(fixture_files anthropic/anthropic-sdk-python '*.sse')
            add "$dir" "128 192 16" cycle frame_chat $(fixture_files openai-chat '*.chunks.txt')
            add "$dir" "128 192 16" cycle frame_typed $(fixture_files anthropic '*.chunks.txt')
            add "$dir" "128 192 16" cycle frame_data $(fixture_files gemini '*.chunks.txt')
            ;;
        ndjson_splitter)
            add "$dir" "128 192 16 63" cycle raw $(fixture_files . '*.chunks.txt')
            ;;
        json_array_splitter)
            add "$dir" "128 128 192 16" cycle as_array $(fixture_files gemini '*.chunks.txt') \
                $(fixture_files openai-compatible '*.chunks.txt')
            add "$dir" "128 128 192 16" cycle raw $(fixture_files gemini '*.json') \
                $(fixture_files openai-chat '*.json')
            ;;
        openai_chat_decode)
            add "$dir" "0 1 4 8 12" 0 raw $(fixture_files openai-chat '*.json') \
                $(fixture_files openai-compatible '*.json')
            ;;
        openai_responses_decode)
            add "$dir" "0 1 4" 0 raw $(fixture_files openai-responses '*.json')
            ;;
        anthropic_decode)
            add "$dir" "0 1 2" 0 raw $(fixture_files anthropic '*.json')
            ;;
        gemini_decode)
            add "$dir" "0 1 3" 0 raw $(fixture_files gemini '*.json')
            ;;
        # embedding_decode: the fixtures hold no embeddings traffic; its seeds are all hand-written.
        openai_chat_stream)
            add "$dir" "0 4 8 12" cycle frame_chat $(fixture_files openai-chat '*.chunks.txt') \
                $(fixture_files openai-compatible '*.chunks.txt')
            add "$dir" "0 4" cycle raw $(fixture_files openai-chat/openai-python-sse '*.bin')
            ;;
        openai_responses_stream)
            add "$dir" "0 1 4" cycle frame_typed $(fixture_files openai-responses '*.chunks.txt')
            ;;
        anthropic_stream)
            add "$dir" "0 2" cycle frame_typed $(fixture_files anthropic '*.chunks.txt')
            add "$dir" "0 2" cycle raw $(fixture_files anthropic/anthropic-sdk-python '*.txt') \
                $(fixture_files anthropic/anthropic-sdk-python '*.sse')
            ;;
        gemini_stream)
            add "$dir" "0 3" cycle frame_data $(fixture_files gemini '*.chunks.txt')
            add "$dir" "0 3" cycle as_array $(fixture_files gemini '*.chunks.txt')
            ;;
        cli_decode)
            # options picks the provider: 0 openai, 2 openai-responses, 3 anthropic, 4 gemini
            add "$dir" "0" 0 raw $(fixture_files openai-chat '*.json') \
                $(fixture_files openai-chat '*.chunks.txt') $(fixture_files openai-compatible '*.chunks.txt')
            add "$dir" "2" 0 raw $(fixture_files openai-responses '*.json') \
                $(fixture_files openai-responses '*.chunks.txt')
            add "$dir" "3" 0 raw $(fixture_files anthropic '*.json') $(fixture_files anthropic '*.chunks.txt') \
                $(fixture_files anthropic/anthropic-sdk-python '*.sse')
            add "$dir" "4" 0 raw $(fixture_files gemini '*.json') $(fixture_files gemini '*.chunks.txt')
            ;;
    esac
    case $target in
        snapshot) add_hand_written "$dir" snapshot 0 && add_hand_written "$dir" snapshot 1 ;;
        validator) add_hand_written "$dir" validator 0 && add_hand_written "$dir" validator 1 ;;
        fast_json)
            add "$dir" "0" 0 raw $(fixture_files openai-chat '*.json') \
                $(fixture_files anthropic '*.json') $(fixture_files gemini '*.json')
            ;;
        partial_json)
            add "$dir" "128 128 3 16" cycle raw $(fixture_files openai-chat '*.json') \
                $(fixture_files gemini '*.json')
            add_hand_written "$dir" partial_json 128
            ;;
        *) add_hand_written "$dir" "$target" 128 ;;
    esac
}

dictionary() {
    case $1 in
        sse_parser) echo sse ;;
        ndjson_splitter | json_array_splitter | snapshot | partial_json | fast_json) echo json ;;
        validator) echo schema ;;
        openai_chat_* | openai_responses_* | anthropic_* | gemini_*) echo "${1%_*}" ;;
        embedding_decode) echo embeddings ;;
        cli_decode) echo providers ;;
    esac
}

# --- Running -----------------------------------------------------------------------------------

# run_target TARGET: replays the target's saved findings, then seeds its corpus and fuzzes it.
# Prints what it did, leaves its summary line in $work/TARGET.summary and fails on a finding.
run_target() {
    target=$1
    binary="$build/tests/fuzz/ullm_fuzz_$target"

    # The saved findings of this target, each run once.
    regressions=0
    for input in "$here/regressions/$target"/*; do
        [ -f "$input" ] || continue
        if ! "$binary" "$input" >"$work/$target.replay.log" 2>&1; then
            echo "== $target: saved finding still reproduces: ${input#"$repo"/}"
            grep -A8 -m1 -E '==ullm-fuzz== FINDING|ERROR: (Address|Undefined|Leak)Sanitizer|runtime error|deadly signal' \
                "$work/$target.replay.log" || tail -5 "$work/$target.replay.log"
            regressions=$((regressions + 1))
        fi
    done

    if [ -n "$corpus_root" ]; then
        corpus="$corpus_root/$target"
    else
        corpus="$work/corpus-$target"
    fi
    mkdir -p "$corpus"
    count=0
    seed "$corpus" "$target"

    set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$target-"
    [ -n "$runs" ] && set -- "$@" -runs="$runs"
    # shellcheck disable=SC2086 # flags are words
    [ -n "${ULLM_FUZZ_FLAGS:-}" ] && set -- "$@" ${ULLM_FUZZ_FLAGS}
    dict="$here/dicts/$(dictionary "$target").dict"
    [ -f "$dict" ] && set -- "$@" -dict="$dict"
    log="$artifacts/$target.log"
    limit="${seconds}s"
    [ "$seconds" -gt 0 ] || limit="no time limit"
    echo "== $target: fuzzing ($limit${runs:+, $runs runs}, $(find "$corpus" -type f | wc -l | tr -d ' ') inputs in the corpus)"
    started=$(date +%s)
    status=0
    "$binary" "$@" "$corpus" >"$log" 2>&1 || status=$?
    elapsed=$(($(date +%s) - started))
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ -z "$executions" ]; then
        # -fork mode reports "#N: cov: ..." progress lines instead of final stats.
        executions=$(sed -n 's/^#\([0-9][0-9]*\): cov:.*/\1/p' "$log" | tail -1)
        [ -n "$executions" ] && [ "$elapsed" -gt 0 ] && speed=$((executions / elapsed))
    fi
    line="$target: ${executions:-?} executions in ${elapsed}s, ${speed:-?} exec/s, corpus $(find "$corpus" -type f | wc -l | tr -d ' ')"
    if [ "$status" -ne 0 ]; then
        echo "   FINDING (exit $status): $line"
        grep -A12 -m1 -E '==ullm-fuzz== FINDING|ERROR: (Address|Undefined|Leak)Sanitizer|runtime error|deadly signal|ERROR: libFuzzer' \
            "$log" || tail -30 "$log"
        sed -n 's/^.*Test unit written to //p' "$log"
    else
        echo "   $line"
    fi
    [ "$regressions" -eq 0 ] || line="$line, $regressions saved findings reproduce"
    [ "$status" -eq 0 ] || line="$line, FINDING"
    echo "$line" >"$work/$target.summary"
    [ "$status" -eq 0 ] && [ "$regressions" -eq 0 ]
}

# lane N: the targets at positions N, N + JOBS, N + 2 JOBS, ... one after another. With more
# than one lane, each target's report is printed whole once it is done.
lane() {
    position=0
    for target in $targets; do
        if [ $((position % jobs)) -eq "$1" ]; then
            if [ "$jobs" -eq 1 ]; then
                run_target "$target" || echo "$target" >>"$work/failed"
            else
                run_target "$target" >"$work/$target.out" 2>&1 || echo "$target" >>"$work/failed"
                cat "$work/$target.out"
            fi
        fi
        position=$((position + 1))
    done
}

for target in $targets; do
    if [ ! -x "$build/tests/fuzz/ullm_fuzz_$target" ]; then
        echo "ullm fuzz: $build/tests/fuzz/ullm_fuzz_$target is missing (configure with" \
            "-DULLM_BUILD_FUZZERS=ON)" >&2
        exit 2
    fi
done

if [ "$jobs" -eq 1 ]; then
    lane 0
else
    lanes=""
    number=0
    while [ "$number" -lt "$jobs" ]; do
        lane "$number" &
        lanes="$lanes $!"
        number=$((number + 1))
    done
    trap 'kill $lanes 2>/dev/null; exit 130' INT TERM
    for pid in $lanes; do wait "$pid"; done
fi

summary=""
for target in $targets; do
    if [ ! -f "$work/$target.summary" ]; then
        echo "$target: did not finish" >"$work/$target.summary"
        echo "$target" >>"$work/failed"
    fi
    summary="$summary
  $(cat "$work/$target.summary")"
done
echo "== fuzzing summary:$summary"
if [ -s "$work/failed" ]; then
    echo "== fuzzing found problems in: $(tr '\n' ' ' <"$work/failed")(inputs in $artifacts)"
    exit 1
fi
echo "== fuzzing found nothing"
