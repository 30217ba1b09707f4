#!/usr/bin/env bash
# core-window.sh — how wide the transports' window into the core is.
#
# Counts the distinct functions declared in service/core/ headers that
# service/transports/*.c call, leaving out the codec and utility headers
# (jsonrpc, json_text, table, randid, metrics, protocol, event_id), which any layer
# may use. Prints the count and the list (name and header). With a LIMIT,
# exits 1 when the count exceeds it, so the window cannot silently grow.
#
#   tests/core-window.sh [LIMIT] [--except FILE.c ...]
#
# How: universal-ctags lists the prototypes (and inline definitions) of each
# core header; each transport file is stripped of comments by the C
# preprocessor (-fpreprocessed: no includes, no macro expansion) and of
# string literals, and a name counts when it is called: followed by "(",
# not as a member (. or ->). --except leaves transport files out of the count
# (e.g. files another change is rewriting).
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
limit=""
except=()
while [ $# -gt 0 ]; do
    case "$1" in
    --except)
        shift
        [ $# -gt 0 ] || { echo "usage: $0 [LIMIT] [--except FILE.c ...]" >&2; exit 2; }
        except+=("$1")
        ;;
    *[!0-9]* | "") echo "usage: $0 [LIMIT] [--except FILE.c ...]" >&2; exit 2 ;;
    *) limit="$1" ;;
    esac
    shift
done

command -v ctags >/dev/null || { echo "core-window: ctags (universal-ctags) is missing" >&2; exit 2; }
cc="${CC:-cc}"

excluded='^(jsonrpc|json_text|table|randid|metrics|protocol|event_id)\.h$'
headers=()
for h in "$repo"/service/core/*.h; do
    [[ "$(basename "$h")" =~ $excluded ]] || headers+=("$h")
done

# name<TAB>header for every function the headers declare or define.
decls="$(ctags -x --language-force=C --c-kinds=pf --_xformat='%N	%F' "${headers[@]}" |
    awk -F'\t' '{ n = split($2, p, "/"); print $1 "\t" p[n] }' | sort -u)"

# The transport files' code: comments and string literals gone.
code=""
for f in "$repo"/service/transports/*.c; do
    b="$(basename "$f")"
    skip=0
    for e in "${except[@]+"${except[@]}"}"; do [ "$b" = "$e" ] && skip=1; done
    [ "$skip" -eq 1 ] && continue
    code+="$("$cc" -fpreprocessed -dD -E -P -x c "$f" 2>/dev/null |
        sed -E 's/"([^"\\]|\\.)*"/""/g; s/'"'"'([^'"'"'\\]|\\.)*'"'"'/0/g')"$'\n'
done

# A call is a name followed by "(" that is not a member (. or ->).
used="$(printf '%s\n' "$code" | sed -E 's/(\.|->)[[:space:]]*[A-Za-z_][A-Za-z0-9_]*//g' |
    grep -oE '[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | sort -u)"
list="$(join -t $'\t' <(printf '%s\n' "$decls") <(printf '%s\n' "$used") | sort -t $'\t' -k2,2 -k1,1)"
n=0
[ -z "$list" ] || n="$(printf '%s\n' "$list" | wc -l)"

printf '%s\n' "$list" | awk -F'\t' 'NF { printf "  %-32s %s\n", $1, $2 }'
echo "transports call $n functions of service/core/${except:+ (leaving out ${except[*]})}"
if [ -n "$limit" ] && [ "$n" -gt "$limit" ]; then
    echo "core-window: $n is more than the limit $limit" >&2
    exit 1
fi
