-- lua/lib/quota.lua: a quota's calendar window and its count, for tenant_admit.lua. The window is the
-- arithmetic of core/src/stores/quota_window.hpp on Lua's doubles (whole seconds, far below 2^53; every
-- division floored as there), so that every store counts a request in the same window.
--
-- A quota is one string key: "<window start>:<units counted>", expiring a second after its window ends. A
-- count of another window (an earlier one, or another period after a policy change) is a new window's 0.

-- The functions are made only by an admit that has a quota (quota_lib()): a script's local functions are
-- made again on every call, which the admits without one should not pay for.
local quota_window, quota_read, quota_write
local function quota_lib()
  -- Days since 1970-01-01 of a civil date, and the year and month of a day (Howard Hinnant's algorithms).
  local function days_from_civil(y, m, d)
    if m <= 2 then y = y - 1 end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local mp = m > 2 and m - 3 or m + 9
    local doy = math.floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
  end

  local function civil_month(days)
    days = days + 719468
    local era = math.floor(days / 146097)
    local doe = days - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400
    if m <= 2 then y = y + 1 end
    return y, m
  end

  -- The window [start, stop) holding now_s: period 0 an hour, 1 a day, 2 a month, of UTC + offset_s.
  local function quota_window(period, offset_s, now_s)
    local l = now_s + offset_s
    local start, stop
    if period == 0 then
      start = math.floor(l / 3600) * 3600
      stop = start + 3600
    elseif period == 1 then
      start = math.floor(l / 86400) * 86400
      stop = start + 86400
    else
      local y, m = civil_month(math.floor(l / 86400))
      start = days_from_civil(y, m, 1) * 86400
      if m == 12 then y, m = y + 1, 1 else m = m + 1 end
      stop = days_from_civil(y, m, 1) * 86400
    end
    return start - offset_s, stop - offset_s
  end

  -- The units counted in the window that starts at `start`.
  local function quota_read(key, start)
    local v = rcall('GET', key)
    if v then
      local colon = string.find(v, ':', 1, true)
      if colon and tonumber(string.sub(v, 1, colon - 1)) == start then return tonumber(string.sub(v, colon + 1)) or 0 end
    end
    return 0
  end

  local function quota_write(key, start, stop, used)
    rcall('SET', key, string.format('%d:%d', start, used), 'EXAT', string.format('%d', stop + 1))
  end
  return quota_window, quota_read, quota_write
end
