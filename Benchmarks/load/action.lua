-- wrk script for the throughput scenario (issue 5, scenario 1).
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- reactord SESSIONS_FILE
--       POST /action {"session":ID,"action":{"type":"increase"}}, IDs from the file round robin
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- reactord-keyed SESSIONS_FILE
--       the same, each request with an Idempotency-Key of its own (formatted per request), keys
--       that sort in the order they are sent, as ReactorClient's do (the time first)
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- reactord-keyed-random SESSIONS_FILE
--       the same with random keys (as a client sending UUIDv4s)
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- reactord-fresh SESSIONS_FILE
--       the same without keys, formatted per request too (the keyed load's reference)
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- reactord-path SESSIONS_FILE
--       POST /sessions/ID/actions {"type":"increase"}, without keys: the route a balancer hashes on
--   wrk -c64 -d10s -s action.lua http://127.0.0.1:PORT -- nchan 64
--       POST /pub/bench0 .. /pub/bench63 with a 16-byte body (nchan publish, no subscribers)
-- Requests are formatted once in init(); request() only picks the next one.
local reqs = {}
local bodies = {}
local keyed = false
local random_keys = false
local fresh = false
local prefix = ""
local n = 0
local i = 0

function init(args)
  local mode = args[1] or "reactord"
  if mode == "reactord" or mode == "reactord-keyed" or mode == "reactord-keyed-random" or mode == "reactord-fresh" then
    keyed = mode == "reactord-keyed" or mode == "reactord-keyed-random"
    random_keys = mode == "reactord-keyed-random"
    fresh = mode == "reactord-fresh"
    -- Keys unique across runs (a warm-up and the measured run are two wrk processes), and in
    -- the order they are made: the time first, then a counter of fixed width.
    math.randomseed(os.time() + os.clock() * 1000000)
    prefix = string.format("%010d-%09d-", os.time(), math.random(999999999))
    for line in io.lines(args[2]) do
      if #line > 0 then
        local body = '{"session":"' .. line .. '","action":{"type":"increase"}}'
        bodies[#bodies + 1] = body
        reqs[#reqs + 1] = wrk.format("POST", "/action", { ["Content-Type"] = "application/json" }, body)
      end
    end
  elseif mode == "reactord-path" then
    for line in io.lines(args[2]) do
      if #line > 0 then
        reqs[#reqs + 1] = wrk.format("POST", "/sessions/" .. line .. "/actions", { ["Content-Type"] = "application/json" },
                                     '{"type":"increase"}')
      end
    end
  elseif mode == "nchan" then
    local n = tonumber(args[2] or "64")
    for k = 0, n - 1 do
      reqs[#reqs + 1] = wrk.format("POST", "/pub/bench" .. k, { ["Content-Type"] = "text/plain" }, "1763700000000000")
    end
  else
    error("action.lua: mode must be reactord, reactord-keyed, reactord-keyed-random, reactord-fresh, reactord-path or nchan")
  end
  if #reqs == 0 then error("action.lua: no requests") end
  i = math.random(#reqs) - 1   -- wrk threads start at different places
end

function request()
  i = i % #reqs + 1
  if keyed or fresh then
    n = n + 1
    local key
    if random_keys then
      key = string.format("%08x%08x%08x%06x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff),
                          math.random(0, 0x7fffffff), math.random(0, 0xffffff))
    else
      key = prefix .. string.format("%09d", n)
    end
    -- The same length either way (30 characters), so the reference differs only in the name.
    local name = keyed and "Idempotency-Key" or "Not-Idempotency"
    return wrk.format("POST", "/action", { ["Content-Type"] = "application/json", [name] = key }, bodies[i])
  end
  return reqs[i]
end
