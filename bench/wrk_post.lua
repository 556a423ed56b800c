-- wrk script of bench/hook_ingest.py's unthrottled step: POST one body, count answers by status,
-- print one JSON line at the end. wrk is a C client: per request it costs this machine a small
-- part of what hey does (hey writes each request as a CSV row and keeps them all).
-- Arguments (after `--`): body file, bearer token or "-", a file to write the accepted cmd ids to
-- (one a line, from each 202's {"accepted": id}) so that the bench can find every one in SQLite.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
  if args[2] and args[2] ~= "-" then
    wrk.headers["Authorization"] = "Bearer " .. args[2]
  end
  statuses = {}
  accepted = {}
  ids_path = args[3]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 202 then
    accepted[#accepted + 1] = body:match('"accepted":"([^"]+)"') or "?"
  end
end

function done(summary, latency, requests)
  local counts = {}
  local out = nil
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do
      counts[code] = (counts[code] or 0) + n
    end
    local path = t:get("ids_path")
    if path then
      out = out or assert(io.open(path, "w"))
      for _, id in ipairs(t:get("accepted")) do
        out:write(id, "\n")
      end
    end
  end
  if out then out:close() end
  local parts = {}
  for code, n in pairs(counts) do
    table.insert(parts, string.format('"%d": %d', code, n))
  end
  local e = summary.errors
  io.write(string.format(
    '{"statuses": {%s}, "duration_us": %d, "p50_us": %d, "p99_us": %d, "socket_errors": %d, "timeouts": %d}\n',
    table.concat(parts, ", "), summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write, e.timeout))
end
