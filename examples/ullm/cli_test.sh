#!/bin/sh
# `ullm` as a script uses it: a piped offline chat, sessions, show, send, embed, and one clear line
# with the right exit status for each kind of bad input.
#   sh cli_test.sh PATH_TO_ULLM SCRATCH_DIR
ullm=$1
dir=$2/cli-test
rm -rf "$dir" && mkdir -p "$dir" || exit 1
failures=0

# expect NAME STATUS PATTERN COMMAND...: runs COMMAND, checks its exit status and that its
# output (stdout and stderr) matches the extended regular expression PATTERN.
expect() {
    name=$1 status=$2 pattern=$3
    shift 3
    out=$("$@" 2>&1)
    got=$?
    if [ "$got" -eq "$status" ] && printf '%s' "$out" | grep -Eq -- "$pattern"; then
        echo "ok   $name"
    else
        echo "FAIL $name (exit $got, wanted $status)"
        printf '%s\n' "$out" | sed 's/^/     | /'
        failures=$((failures + 1))
    fi
}

store=$dir/sessions.db
chat_offline() {
    printf 'What time is it?\nWhat is 12 * (3 + 4)?\n/totals\n' |
        "$ullm" chat --offline --store "$store" --session piped
}
expect "a piped offline chat calls the calculator and answers" 0 \
    'ullm> 12 \* \(3 \+ 4\) = 84\.' chat_offline
expect "a piped chat writes no history" 0 '^none$' \
    sh -c "test -e '$store.history' && echo exists || echo none"
expect "--no-history belongs to chat" 64 'unknown option --no-history' \
    "$ullm" send --offline --no-history hi
expect "show prints the answer" 0 '^12 \* \(3 \+ 4\) = 84\.$' \
    "$ullm" show piped --store "$store"
expect "sessions lists it with its messages" 0 '^piped +[0-9T:-]+ +8 +\$0\.000000$' \
    "$ullm" sessions --store "$store"
expect "show prints the session's provider and model" 0 '\| Provider \| offline \|.*' \
    "$ullm" show piped --store "$store"
expect "show prints the model" 0 '^\| Model \| scripted \|$' "$ullm" show piped --store "$store"
expect "a session resumes with the model its last turn used" 0 \
    'ullm chat · offline/other · session switched \(resumed, 2 messages; model kept' \
    sh -c "printf '/model other\nhi\n' | '$ullm' chat --offline --store '$store' --session switched >/dev/null &&
           printf '/exit\n' | '$ullm' chat --offline --store '$store' --session switched"
expect "--model wins over the session's" 0 'offline/scripted · session switched \(resumed, 2 messages\)' \
    sh -c "printf '/exit\n' | '$ullm' chat --offline --model scripted --store '$store' --session switched"
printf '/model other\nhi\n' | "$ullm" chat --offline --store "$store" --session prov >/dev/null
expect "send --session says on stderr that it goes on with the session's model" 0 \
    '^ullm send: session prov goes on with its model offline/other .*1\+1 = 2\.$' \
    sh -c "'$ullm' send --offline --store '$store' --session prov 'What is 1+1?' 2>&1 | tr '\n' ' ' | sed 's/ $//'"
expect "--provider takes the stored model when it is that provider's" 0 \
    'session prov goes on with its model offline/other' \
    "$ullm" send --offline --provider offline --store "$store" --session prov 'What is 1+1?'
expect "--provider never takes another provider's stored model" 0 \
    'session prov last used offline/other, not a model of --provider openai, so the default model is used' \
    "$ullm" send --offline --provider openai --store "$store" --session prov 'What is 1+1?'
expect "that turn went to the default model" 0 'session prov goes on with its model offline/scripted' \
    "$ullm" send --offline --store "$store" --session prov 'What is 1+1?'
expect "show prints the tool call" 0 '\*\*Tool call\*\* `current_time`' \
    "$ullm" show piped --store "$store"
expect "a resumed session counts its messages and keeps its model" 0 \
    'session piped \(resumed, 8 messages; model kept from the session\)' \
    sh -c "printf '/exit\n' | '$ullm' chat --offline --store '$store' --session piped"
expect "a trailing backslash continues the message on the next line" 0 \
    '\.\.\.> 2\+3\?.*ullm> 2\+3 = 5\.' \
    sh -c "printf 'What is \\\\\n2+3?\n' | '$ullm' chat --offline --store '$store' | tr '\n' ' '"
expect "send prints the reply" 0 '^2\+3 = 5\.$' "$ullm" send --offline 'What is 2+3?'
expect "send reads stdin and prints JSON" 0 '"text":"2\^10 = 1024\.".*"provider":"offline"' \
    sh -c "echo 'What is 2^10?' | '$ullm' send --offline --json"
expect "no tools with --no-tools" 0 '^ullm> I am the offline model' \
    sh -c "echo 'What time is it?' | '$ullm' chat --offline --no-tools --store '$store'"

expect "a budget works with the offline model" 0 '^2\+2 = 4\.$' \
    "$ullm" send --offline --budget 0.01 'What is 2+2?'
mkdir -p "$dir/allowed" && printf 'hello file\n' >"$dir/allowed/a.txt" &&
    printf 'secret\n' >"$dir/secret.txt" && ln -sf ../secret.txt "$dir/allowed/link.txt"
expect "read_file reads under --allow-dir" 0 'a\.txt has 1 lines\. It begins: "hello file' \
    "$ullm" send --offline --allow-dir "$dir/allowed" 'read a.txt'
expect "a symlink out of --allow-dir is refused" 0 'Access denied: link\.txt is outside' \
    "$ullm" send --offline --allow-dir "$dir/allowed" 'read link.txt'
expect "a path out of --allow-dir is refused" 0 'Access denied: \.\./secret\.txt is outside' \
    "$ullm" send --offline --allow-dir "$dir/allowed" 'read ../secret.txt'
expect "--allow-dir must be a directory" 64 'allow-dir .* is not a directory' \
    "$ullm" chat --offline --allow-dir "$dir/nope"
expect "an unknown option" 64 '^ullm chat: unknown option --bogus' "$ullm" chat --bogus
expect "a bad budget" 64 'budget needs a number of USD' "$ullm" chat --offline --budget abc
expect "a bad budget action" 64 'on-budget needs throw, warn or skip' \
    "$ullm" chat --offline --on-budget maybe
expect "a bad tool-round limit" 64 'max-tool-rounds needs a whole number from 0 to 100' \
    "$ullm" send --offline --max-tool-rounds 101 hi
expect "an unknown command" 64 'unknown command "chatt"' "$ullm" chatt
printf 'this is not a database' >"$dir/bad.db"
expect "an unreadable store" 1 '^ullm sessions: cannot open the session store: .*bad\.db.*not a database' \
    "$ullm" sessions --store "$dir/bad.db"
expect "a session that does not exist" 1 'no session "nope"' "$ullm" show nope --store "$store"
expect "no key and no server" 2 'no API key .* run with --offline' \
    env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY -u GEMINI_API_KEY -u GOOGLE_API_KEY \
    "$ullm" chat --store "$store"
expect "an unreachable server" 1 '^ullm send: .*(connect|Connection refused)' \
    "$ullm" send --base-url http://127.0.0.1:9/v1 --model m hi
expect "a piped chat whose server is down exits 1, its session kept" 1 \
    'connection_failed' \
    sh -c "echo hi | '$ullm' chat --base-url http://127.0.0.1:9/v1 --model m --store '$store' --session piped"
expect "and the session is as it was" 0 '^piped +[0-9T:-]+ +8 ' "$ullm" sessions --store "$store"
expect "embed without input" 64 '^ullm embed: no input' \
    sh -c "'$ullm' embed --offline </dev/null"
expect "embed with bad dimensions" 64 'dimensions needs a whole number from 1' \
    "$ullm" embed --offline --dimensions 0 hello
expect "embed offline: the scripted model has no embeddings" 1 \
    '^ullm embed: offline has no embeddings API' "$ullm" embed --offline hello
expect "embed with no key and no model" 2 'no embedding model' \
    env -u OPENAI_API_KEY -u GEMINI_API_KEY -u GOOGLE_API_KEY "$ullm" embed hello
expect "embed from an unreachable server" 1 '^ullm embed: .*(connect|Connection refused)' \
    "$ullm" embed --base-url http://127.0.0.1:9/v1 --model m hello

# `ullm usage` over the ledger that send writes with --ledger: each send is two model requests
# (a calculator call, then the answer), each recorded.
ledger=$dir/usage.db
"$ullm" send --offline --store "$dir/usage-sessions.db" --ledger "$ledger" --session books 'What is 2+3?' >/dev/null 2>&1
"$ullm" send --offline --store "$dir/usage-sessions.db" --ledger "$ledger" --session books 'What is 4+4?' >/dev/null 2>&1
"$ullm" send --offline --store "$dir/usage-sessions.db" --ledger "$ledger" --session notes 'What is 1+1?' >/dev/null 2>&1
expect "usage totals the ledger send wrote" 0 '^ +6 +[0-9]+ +[0-9]+ .*0\.000000 +0$' \
    "$ullm" usage --ledger "$ledger"
expect "usage --by session" 0 'books +4 .*notes +2 .*total +6 ' \
    sh -c "'$ullm' usage --ledger '$ledger' --by session | tr '\n' ' '"
expect "usage --by model" 0 '^model +requests +input .*scripted +6 ' \
    sh -c "'$ullm' usage --ledger '$ledger' --by model | tr '\n' ' '"
expect "usage --by day with --since today" 0 '^day +requests .*[0-9]{4}-[0-9]{2}-[0-9]{2} +6 ' \
    sh -c "'$ullm' usage --ledger '$ledger' --by day --since $(date -u +%Y-%m-%d) | tr '\n' ' '"
expect "usage --until is exclusive: nothing before today" 0 '^ +0 +0 +0 +0 +0 +0 +- +0$' \
    "$ullm" usage --ledger "$ledger" --until "$(date -u +%Y-%m-%d)T00:00:00Z"
expect "usage --csv prints RFC 4180 rows" 0 '^id,tenant,session_id,provider,model,.*"books","offline","scripted"' \
    sh -c "'$ullm' usage --ledger '$ledger' --csv | tr -d '\r' | tr '\n' ' '"
expect "usage --jsonl prints one record a line" 0 '^6$' \
    sh -c "'$ullm' usage --ledger '$ledger' --jsonl | grep -c '\"session_id\":\"[a-z]*\",\"provider\":\"offline\"'"
expect "usage with a bad --since" 64 '^ullm usage: --since needs an ISO 8601 date or time .*"2026-13-01"' \
    "$ullm" usage --ledger "$ledger" --since 2026-13-01
expect "usage with --until before --since" 64 'invalid_usage_query.*until' \
    "$ullm" usage --ledger "$ledger" --since 2026-12-02 --until 2026-12-01T23:00+00:00
expect "usage with an unknown key" 64 '^ullm usage: --by takes model, day, session' \
    "$ullm" usage --ledger "$ledger" --by week
expect "usage without a ledger" 1 '^ullm usage: .*usage_ledger_failed.*no usage ledger at ' \
    "$ullm" usage --ledger "$dir/none.db"

if [ "$failures" -eq 0 ]; then echo "all cli checks passed"; else echo "$failures cli checks FAILED"; fi
[ "$failures" -eq 0 ]
