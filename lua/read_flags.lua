-- read_flags.lua: the fleet-wide modes, the kill switch that needs no deploy. An operator sets them with
--   redis-cli HSET <prefix>:flags request_rate off      (or dark, or enforce; HDEL to go back to local)
--
-- KEYS[1]  <prefix>:flags   hash of limiter name -> "enforce" | "dark" | "off"
-- Reply:   the hash as a flat array {field, value, ...}
return redis.call('HGETALL', KEYS[1])
