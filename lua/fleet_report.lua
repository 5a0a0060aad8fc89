-- fleet_report.lua: one client's report of the fleet usage it decides in process, and what the others
-- and the fleet set hold. A hot tenant's non-critical requests decided in process (hot_tenants.hpp) hold
-- no slot in the fleet set; each client reports their count every 100 ms instead, and the fleet shedder
-- decides from the set's live slots plus the sum of the live reports. A report counts until it
-- expires (a client that died stops counting then), and the sum of the live ones is kept in the field
-- "sum" for tenant_admit.lua, which adds it to the set's count.
--
-- KEYS[1]  <prefix>:fleet:reports   hash: client id -> "<in flight>:<expires, us>", and "sum"
-- KEYS[2]  <prefix>:fleet           the fleet set (tenant_admit.lua)
-- ARGV[1]  this client's id   ARGV[2]  its in-process non-critical requests in flight
-- ARGV[3]  how long a report counts, us (0: withdraw this client's report)     ARGV[4]  fleet ttl, us
-- ARGV[5]  (redis.clock "client" only) the caller's clock, us since the epoch
-- Reply:   {the other clients' live reports summed, the fleet set's live slots, how many other clients
--          have a live report}
local rcall = redis.call
-- The clock: Redis' TIME, or with redis.clock "client" the caller's, in us (ARGV[5]).
local now
if ARGV[5] then
  now = tonumber(ARGV[5])
else
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local me, mine, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local others, reporting, dead = 0, 0, {}
local all = rcall('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local field = all[i]
  if field ~= 'sum' and field ~= me then
    local count, expires = string.match(all[i + 1], '^(%d+):(%d+)$')
    if count and tonumber(expires) > now then
      others = others + tonumber(count)
      reporting = reporting + 1
    else
      dead[#dead + 1] = field
    end
  end
end
if #dead > 0 then rcall('HDEL', KEYS[1], unpack(dead)) end
-- A report of nothing in flight stays too (until it expires): the client is there, and counts among those
-- that share the room left (`reporting`).
if ttl > 0 then
  rcall('HSET', KEYS[1], me, string.format('%d:%d', mine, now + ttl), 'sum', string.format('%d', others + mine))
  -- Garbage collection once nobody reports any more.
  rcall('PEXPIRE', KEYS[1], string.format('%d', math.ceil(ttl / 1000)))
else
  rcall('HDEL', KEYS[1], me)
  rcall('HSET', KEYS[1], 'sum', string.format('%d', others))
end
local live = rcall('ZCOUNT', KEYS[2], string.format('(%d', now - tonumber(ARGV[4])), '+inf')
return {others, live, reporting}
