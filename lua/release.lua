-- release.lua: frees a request's slots. Idempotent: a slot that is gone already (released, or swept
-- after its ttl) is simply not there.
--
-- KEYS[1]  <prefix>:{<tenant>}:conc   KEYS[2]  <prefix>:fleet
-- ARGV[1]  two flags, '1' or '0': release the tenant slot, release the fleet slot
-- ARGV[2]  the slot id
-- Reply:   the number of slots removed
local rcall = redis.call
local RELEASE = string.byte('1')
local removed = 0
if string.byte(ARGV[1], 1) == RELEASE then removed = removed + rcall('ZREM', KEYS[1], ARGV[2]) end
if string.byte(ARGV[1], 2) == RELEASE then removed = removed + rcall('ZREM', KEYS[2], ARGV[2]) end
return removed
