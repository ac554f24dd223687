-- wrk script: one short non-streaming completion per request, spread over
-- 64 sessions so the session tables stay small and warm.
local n = 0
request = function()
  n = n + 1
  local headers = { ["Content-Type"] = "application/json", ["X-Session-Id"] = "bench-" .. (n % 64) }
  return wrk.format("POST", "/v1/completions", headers,
    '{"model":"qwen3-32b","prompt":"def add(a, b):","max_tokens":1}')
end
