-- release.lua: frees a request's slots, and gives back a reservation its caller gave up before its turn.
-- Idempotent: a slot that is gone already (released, or swept after its ttl) is simply not there, and a
-- bucket that has moved since the reservation (or was given back already) is left alone.
--
-- KEYS[1]  <prefix>:{<tenant>}:conc   KEYS[2]  <prefix>:fleet
-- KEYS[3]  <prefix>:{<tenant>}:rate (only with the third flag)
-- ARGV[1]  two to four flags, '1' or '0': release the tenant slot, release the fleet slot, give back the
--          reservation, publish the tenant slot's release
-- ARGV[2]  the slot id
-- ARGV[3]  the reservation's give-back: the bucket's full instant as the reservation left it, and ARGV[4]
--          the same less the reservation's cost (both as lib/bucket.lua writes them). Only when the bucket
--          still holds ARGV[3] (no reservation came after it, nothing else moved it) is ARGV[4] written.
--          Both '' without the third flag.
-- ARGV[5]  with the fourth flag: the tenant's channel (<prefix>:{<tenant>}:freed), on which a freed tenant
--          slot is published: the acquires waiting for one (stores/redis/slot_notices.cpp) try again.
-- Reply:   the number of slots removed, plus 1000 when the reservation was given back
local rcall = redis.call
local RELEASE = string.byte('1')
local removed = 0
if string.byte(ARGV[1], 1) == RELEASE then
  removed = removed + rcall('ZREM', KEYS[1], ARGV[2])
  -- pcall: a user whose ACL predates the channel (&<prefix>:*, +publish) still releases; its waiters then
  -- see the slot on their 1 s re-check.
  if removed > 0 and string.byte(ARGV[1], 4) == RELEASE then redis.pcall('PUBLISH', ARGV[5], '') end
end
if string.byte(ARGV[1], 2) == RELEASE then removed = removed + rcall('ZREM', KEYS[2], ARGV[2]) end
if string.byte(ARGV[1], 3) == RELEASE and rcall('GET', KEYS[3]) == ARGV[3] then
  rcall('SET', KEYS[3], ARGV[4], 'KEEPTTL')
  removed = removed + 1000
end
return removed
