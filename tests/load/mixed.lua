-- mixed.lua - wrk script for tests/load/run.sh: a mix of small and large
-- attention requests (bodies from LOAD_DIR/*.json), every status tallied.
local dir = os.getenv("LOAD_DIR")
local threads = {}

local function slurp(name)
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local hdr = { ["Content-Type"] = "application/json" }
  -- one large (offloaded, >= 64 KiB) in every ten; the rest small or medium
  local mix = {
    { "/attention/scaled_dot", "small.json" }, { "/attention/dot", "small.json" },
    { "/multihead", "mh_small.json" }, { "/attention/general", "small.json" },
    { "/attention/scaled_dot", "medium.json" }, { "/attention/additive", "small.json" },
    { "/attention/scaled_dot", "small.json" }, { "/multihead", "mh_small.json" },
    { "/attention/concat_tanh", "small.json" }, { "/attention/scaled_dot", "large.json" },
  }
  reqs = {}
  for i, m in ipairs(mix) do
    reqs[i] = wrk.format("POST", m[1], hdr, slurp(m[2]))
  end
  n = 0
  statuses = {}
end

function request()
  n = n + 1
  return reqs[(n - 1) % #reqs + 1]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do
      total[k] = (total[k] or 0) + v
    end
  end
  for k, v in pairs(total) do
    io.write(string.format("status %d %d\n", k, v))
  end
  io.write(string.format("requests %d\n", summary.requests))
  io.write(string.format("socket_errors %d %d %d %d\n", summary.errors.connect, summary.errors.read,
                         summary.errors.write, summary.errors.timeout))
  io.write(string.format("p50_ms %.3f\n", latency:percentile(50) / 1000))
  io.write(string.format("p99_ms %.3f\n", latency:percentile(99) / 1000))
  io.write(string.format("max_ms %.3f\n", latency.max / 1000))
end
