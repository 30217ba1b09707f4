#!/usr/bin/env bash
# Builds the libFuzzer harnesses of the decoders that read bytes from the
# network or a pipe (the WebSocket frame parser, the stdio framing decoder,
# the event-id cursor parser, the Accept/Content-Type parser, and
# mcp-bridge's) with ASan and UBSan, and runs each for a bounded time
# (FUZZ_SECONDS each, default 60; one per CPU at a time). Exits non-zero when a fuzzer finds a
# crash, a leak or a broken invariant; the crashing input is left in the
# work directory it prints.
#
#   tests/fuzz/run.sh            # 60 s
#   FUZZ_SECONDS=300 tests/fuzz/run.sh
#
# Needs clang with the libFuzzer runtime (Debian: clang, libclang-rt-14-dev).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/mcpd-fuzz-XXXXXX")}
cc=${CC_FUZZ:-clang}

# The harnesses are CMake targets (tests/fuzz/CMakeLists.txt), built with
# the project's warnings by clang in their own build directory.
build="${FUZZ_BUILD:-$repo/build-fuzz}"
cmake -S "$repo" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug -DMCPD_FUZZ=ON -DMCPD_WERROR=ON \
    >/dev/null
cmake --build "$build" --target fuzzers -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
targets="fuzz_ws_frame fuzz_stdio_frame fuzz_bridge_sse fuzz_bridge_ws fuzz_bridge_options
    fuzz_cursor fuzz_media_type fuzz_forwarded fuzz_jsonrpc fuzz_sse"
for t in $targets; do
    mkdir -p "$work/$t/corpus"
    cp "$build/bin/$t" "$work/$t/$t"
done

# Seeds: well-formed inputs, so the fuzzers start past the header checks.
# WebSocket client frames use the mask key 01 02 03 04.
seed() { printf "$3" >"$work/$1/corpus/$2"; }
seed fuzz_ws_frame text '\x03\x00\x81\x85\x01\x02\x03\x04\x69\x67\x6f\x68\x6e'
seed fuzz_ws_frame frag '\x05\x03\x01\x82\x01\x02\x03\x04\x60\x60\x89\x80\x01\x02\x03\x04\x80\x82\x01\x02\x03\x04\x62\x61'
seed fuzz_ws_frame close '\x04\x00\x88\x85\x01\x02\x03\x04\x02\xea\x62\x7d\x64'
seed fuzz_ws_frame len16 '\x07\x01\x81\xfe\x00\x80\x01\x02\x03\x04'
seed fuzz_ws_frame len64 '\x09\x00\x81\xff\x00\x00\x00\x00\x00\x01\x00\x00\x01\x02\x03\x04'
seed fuzz_ws_frame utf8 '\x06\x00\x81\x84\x01\x02\x03\x04\xe3\x80\xaf\x9a'
seed fuzz_stdio_frame ndjson '\x06\x03{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"a":[1]}\r\n\n'
seed fuzz_stdio_frame cl '\x06\x02Content-Length: 9\r\nContent-Type: x\r\n\r\n{"a":[1]}'
seed fuzz_stdio_frame bom '\x04\x01\xef\xbb\xbf{}\n'
seed fuzz_bridge_sse events '\x03: keepalive\r\n\r\nid: s1:0\nretry: 500\ndata: {"a":1}\n\nevent: endpoint\ndata: /m?x=1\r\rdata\ndata: two\n\n'
seed fuzz_bridge_ws text '\x03\x00\x81\x05hello\x89\x02hi\x01\x03\x7e\x80\x00\x81\x82\xc3\xa9'
seed fuzz_cursor id '0123456789abcdef0123456789abcdef:41'
seed fuzz_cursor prime 'abc:-1'
seed fuzz_cursor edge 'abc:9223372036854775806'
seed fuzz_media_type accept '\x00application/json , text/event-stream;q=0.5'
seed fuzz_media_type wild '\x01*/*;q=0, text/*;charset="a,b\\"";q=1.000'
seed fuzz_forwarded proxies 'loopback, 10.0.0.0/8 fc00::/7\x00203.0.113.1, [2001:db8::2], 198.51.100.7:80, 10.0.0.1'
seed fuzz_jsonrpc request '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}'
seed fuzz_jsonrpc batch '[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"m"}}]'
seed fuzz_sse event '\x03abc:12\x00{"a":"b\\nc"}\r\nline two\rthree'
seed fuzz_sse trailing_lf '\xab\n' # once lost the empty line after a final LF
seed fuzz_bridge_options header '\x00X-Api-Key: ${FUZZ_BRIDGE_VAR}-x'
seed fuzz_bridge_options url '\x00http://127.0.0.1:8080/mcp'
seed fuzz_bridge_options url6 '\x01https://[::1]/mcp?x=${A}'

# One harness per CPU at a time: each is single-threaded.
fuzz_one() { # fuzz_one TARGET: its exit status in $work/TARGET/rc
    local t="$1" rc=0
    (cd "$work/$t" && ./$t -max_total_time="$seconds" -print_final_stats=1 \
        -timeout=10 -rss_limit_mb=2048 corpus) >"$work/$t/fuzz.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$t/rc"
}
cpus=$(nproc 2>/dev/null || echo 2)
for t in $targets; do
    echo "fuzz: $t in $work/$t (for ${seconds}s)"
    fuzz_one "$t" &
    while [ "$(jobs -rp | wc -l)" -ge "$cpus" ]; do wait -n || true; done
done
wait
rc=0
for t in $targets; do
    echo "fuzz: $t"
    tail -n 4 "$work/$t/fuzz.log"
    if [ "$(cat "$work/$t/rc")" != 0 ]; then
        echo "fuzz: $t FAILED (exit $(cat "$work/$t/rc")); crash input and log in $work/$t" >&2
        rc=1
    fi
done
[ "$rc" -eq 0 ] || exit 1
echo "fuzz: no crash in ${seconds}s per decoder"
[ -n "${FUZZ_WORK:-}" ] || rm -rf "$work"
