-- echo.lua: wrk script that drives `tools/call echo` on one open MCP session.
--
-- The session id comes from the environment (MCP_SESSION_ID), opened
-- beforehand by open_session.mjs. Request ids are unique per session: each
-- wrk thread numbers its requests from thread_index * 1e9, since in-flight
-- requests of one session must not share an id.
--
-- A response counts as an error when its status is not 2xx, or when its body
-- (JSON, or the SSE stream that carries the reply) holds no "result". done()
-- prints one machine-readable line:  BENCH requests=N errors=E non2xx=M
-- first_error=<status>:<body prefix>

local session = os.getenv("MCP_SESSION_ID")
if session == nil or session == "" then
  io.stderr:write("echo.lua: MCP_SESSION_ID is not set\n")
  os.exit(2)
end

wrk.method = "POST"
wrk.path = os.getenv("MCP_PATH") or "/mcp"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = session
wrk.headers["MCP-Protocol-Version"] = os.getenv("MCP_PROTOCOL_VERSION") or "2025-11-25"

local threads = {}
local next_index = 0

function setup(thread)
  next_index = next_index + 1
  thread:set("index", next_index)
  table.insert(threads, thread)
end

function init(args)
  seq = index * 1000000000
  errors = 0
  non2xx = 0
  responses = 0
  first_error = ""
end

local body_fmt = '{"jsonrpc":"2.0","id":%d,"method":"tools/call",' ..
  '"params":{"name":"echo","arguments":{"message":"hello from wrk"}}}'

function request()
  seq = seq + 1
  return wrk.format(nil, nil, nil, string.format(body_fmt, seq))
end

function response(status, headers, body)
  responses = responses + 1
  local bad = false
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    bad = true
  elseif body == nil or not string.find(body, '"result"', 1, true) then
    bad = true
  end
  if bad then
    errors = errors + 1
    if first_error == "" then
      first_error = tostring(status) .. ":" .. string.gsub(string.sub(body or "", 1, 160), "%s", " ")
    end
  end
end

function done(summary, latency, requests)
  local e, n, r, first = 0, 0, 0, ""
  for _, t in ipairs(threads) do
    e = e + t:get("errors")
    n = n + t:get("non2xx")
    r = r + t:get("responses")
    if first == "" then first = t:get("first_error") end
  end
  io.write(string.format("BENCH responses=%d errors=%d non2xx=%d first_error=%s\n",
    r, e, n, first))
end
