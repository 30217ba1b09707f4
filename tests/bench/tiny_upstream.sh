#!/bin/sh
# tiny_upstream.sh — the smallest stdio MCP server a gateway bench can start a
# thousand of: POSIX sh (dash: about 1 MiB resident each, where a Node server
# is about 40), no process per message. Reads NDJSON; answers initialize
# (echoing the client's protocolVersion), tools/list (one tool, echo),
# tools/call (text "ok"), ping ({}), and -32601 to any other request;
# ignores notifications. The id is taken as the text after "id": up to the
# next , or } (numbers and plain strings, as mcpd sends them).
while IFS= read -r line; do
  case $line in
  *'"id":'*) ;;
  *) continue ;; # a notification
  esac
  id=${line#*\"id\":}
  id=${id%%[,\}]*}
  case $line in
  *'"method":"initialize"'*)
    pv=${line#*\"protocolVersion\":\"}
    pv=${pv%%\"*}
    printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"tiny-upstream","version":"1"}}}\n' "$id" "$pv"
    ;;
  *'"method":"tools/list"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"Answers ok","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}]}}\n' "$id"
    ;;
  *'"method":"tools/call"'*)
    printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}\n' "$id"
    ;;
  *'"method":"ping"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  *'"method":'*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}\n' "$id" ;;
  esac
done
