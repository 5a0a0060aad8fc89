-- The seed document's request rate limiter ("rate-limiting-that-holds-under-pressure", Limiter 1),
-- copied as published: the baseline floodwall is measured against, so its design is kept as it is
-- (two keys per tenant, EVAL of the script text on every request, `now` from the app server's clock in
-- whole seconds). Do not improve it here.
--
-- KEYS[1] request_rate_limiter.<user>.tokens   KEYS[2] request_rate_limiter.<user>.timestamp
-- ARGV: rate, capacity, now (unix seconds), requested.  Reply: {allowed, new_tokens}.
local tokens_key = KEYS[1]
local timestamp_key = KEYS[2]

local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])

local fill_time = capacity/rate
local ttl = math.floor(fill_time*2)

local last_tokens = tonumber(redis.call("get", tokens_key))
if last_tokens == nil then
  last_tokens = capacity          -- unknown tenant starts full
end

local last_refreshed = tonumber(redis.call("get", timestamp_key))
if last_refreshed == nil then
  last_refreshed = 0
end

local delta = math.max(0, now-last_refreshed)
local filled_tokens = math.min(capacity, last_tokens+(delta*rate))
local allowed = filled_tokens >= requested
local new_tokens = filled_tokens
if allowed then
  new_tokens = filled_tokens - requested
end

redis.call("setex", tokens_key, ttl, new_tokens)
redis.call("setex", timestamp_key, ttl, now)

return { allowed, new_tokens }
