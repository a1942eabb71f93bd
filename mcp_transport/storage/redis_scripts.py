"""The Redis event store's Lua scripts (``redis.py``): ``APPEND_LUA``, one call for a batch of
appends, with its arguments (``_script_args``), ``DELETE_LUA``, a session's streams and
their bookkeeping, and ``NUMBERED_LUA``, a stream's entries from an index on (read_numbered).
What they do and why: ``redis.py``'s docstring."""
from collections import defaultdict

NUMBERED_LUA = """
-- KEYS[1]: a stream. ARGV: the message its first entry ever holds, the index (from that one) of
-- the first entry wanted, then, when Redis's oldest entry is not that first one, its index and
-- id as the caller learnt them. Returns {known, length, oldest id, index of the oldest,
-- entries...}: known 1 when Redis's oldest entry is the first, or the one the caller named:
-- then the entries Redis has from the wanted one's predecessor on, newest first, that
-- predecessor without its message (its id and final flag are what a follower needs); else 0,
-- and nothing read (Redis has none of the stream, or its oldest entry's index is not known).
local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if not oldest then return {0, 0, ''} end
local length = redis.call('XLEN', KEYS[1])
local offset
if oldest[2][1] == 'm' and oldest[2][2] == ARGV[1] then
  offset = 0
elseif ARGV[4] and oldest[1] == ARGV[4] then
  offset = tonumber(ARGV[3])
else
  return {0, length, oldest[1]}
end
local answer = {1, length, oldest[1], offset}
local wanted = math.min(offset + length - tonumber(ARGV[2]) + 1, length)
if wanted <= 0 then return answer end
local entries = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', wanted)
if tonumber(ARGV[2]) - 1 >= offset then
  local previous = entries[#entries]
  local final = '0'
  for k = 1, #previous[2], 2 do
    if previous[2][k] == 'f' then final = previous[2][k + 1] end
  end
  entries[#entries] = {previous[1], {'m', '', 'f', final}}
end
for _, entry in ipairs(entries) do answer[#answer + 1] = entry end
return answer
"""

APPEND_LUA = """
-- KEYS: metrics hash, lengths hash, expiries zset.
-- ARGV: maxlen, ttl (s), session cap, trim ("=" exact or "~"), session byte cap (0: none),
--   then for each stream:
--   stream key, session key, bell channel, closed-session key, n, then n x (message, final flag).
-- Returns the new entry ids in the order of the events ("" for an event of a closed session,
-- which is not added: a request still running when its session was deleted leaves nothing).
local metrics, lengths, expiries = KEYS[1], KEYS[2], KEYS[3]
local maxlen, ttl, cap, trim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local byte_cap = tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local counts = {appended = 0, capacity = 0, ttl = 0, session_cap = 0}

local function ms(value) return string.format('%.0f', value) end

local function kept(field) return tonumber(redis.call('HGET', lengths, field) or '0') end

local function add_kept(field, delta)
  if delta ~= 0 and redis.call('HINCRBY', lengths, field, delta) <= 0 then
    redis.call('HDEL', lengths, field)
  end
end

-- Bytes of messages kept, per stream and per session, in the same hash ("b|<key>").
local function bytes_of(key) return kept('b|' .. key) end
local function add_bytes(key, delta) add_kept('b|' .. key, delta) end

local function entry_bytes(entry)
  local fields = entry[2]
  for k = 1, #fields, 2 do
    if fields[k] == 'm' then return #fields[k + 1] end
  end
  return 0
end

-- The sizes of a stream's oldest count entries, oldest first.
local function oldest_sizes(stream, count)
  local sizes = {}
  if count > 0 then
    for _, entry in ipairs(redis.call('XRANGE', stream, '-', '+', 'COUNT', count)) do
      sizes[#sizes + 1] = entry_bytes(entry)
    end
  end
  return sizes
end

local function first_ms(stream)
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  return first and string.match(first[1], '^%d+') or ms(now)
end

-- A stream Redis no longer has: drop its bookkeeping; returns how many events it held.
local function forget(session, stream)
  local n = kept(stream)
  add_bytes(session, -bytes_of(stream))
  redis.call('HDEL', lengths, stream, 'b|' .. stream)
  redis.call('ZREM', expiries, session .. '|' .. stream)
  redis.call('ZREM', session, stream)
  add_kept(session, -n)
  return n
end

local function sweep()
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', expiries, '-inf', ms(now), 'LIMIT', 0, 64)) do
    local session, stream = string.match(member, '^(.*)|(.*)$')
    local left = redis.call('PTTL', stream)
    if left == -2 then
      counts.ttl = counts.ttl + forget(session, stream)
    else
      redis.call('ZADD', expiries, ms(now + (left > 0 and left or ttl * 1000)), member)
    end
  end
end

local function append(i, ids, sessions)
  local stream, session, bell, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 4])
  if redis.call('EXISTS', ARGV[i + 3]) == 1 then
    for _ = 1, n do ids[#ids + 1] = '' end
    return i + 5 + 2 * n
  end
  local recorded, before = kept(stream), redis.call('XLEN', stream)
  counts.ttl = counts.ttl + math.max(0, recorded - before)
  if before == 0 then  -- what the bookkeeping says it held is gone
    add_bytes(session, -bytes_of(stream))
    redis.call('HDEL', lengths, 'b|' .. stream)
  end
  -- The entries the trim may remove (at most this many, "~" removes fewer), read before it does.
  local trimmable = oldest_sizes(stream, math.min(before, before + n - maxlen))
  local added = 0
  -- A stream Redis lost (flush, restart, TTL) may have had ids in this very ms: a new one
  -- starts at the next ms, so its ids are greater than any the lost one gave out.
  local id = (before == 0 and redis.call('EXISTS', stream) == 0) and ms(now + 1) .. '-0' or '*'
  for j = 1, n do
    local message, final = ARGV[i + 3 + 2 * j], ARGV[i + 4 + 2 * j]
    added = added + #message
    if final == '1' then
      ids[#ids + 1] = redis.call('XADD', stream, 'MAXLEN', trim, maxlen, id, 'm', message, 'f', '1')
    else
      ids[#ids + 1] = redis.call('XADD', stream, 'MAXLEN', trim, maxlen, id, 'm', message)
    end
    id = '*'
  end
  local after = redis.call('XLEN', stream)
  counts.appended = counts.appended + n
  counts.capacity = counts.capacity + before + n - after
  local removed, freed = before + n - after, 0
  for k = 1, math.min(removed, #trimmable) do freed = freed + trimmable[k] end
  for k = 1, removed - #trimmable do freed = freed + #ARGV[i + 3 + 2 * k] end  -- new ones trimmed too
  add_bytes(stream, added - freed)
  add_bytes(session, added - freed)
  redis.call('HSET', lengths, stream, after)
  add_kept(session, after - recorded)
  redis.call('PEXPIRE', stream, ttl * 1000)
  redis.call('ZADD', expiries, ms(now + ttl * 1000), session .. '|' .. stream)
  if before == 0 or after < before + n then redis.call('ZADD', session, first_ms(stream), stream) end
  redis.call('PEXPIRE', session, ttl * 1000)
  redis.call('PUBLISH', bell, '1')
  sessions[session] = true
  return i + 5 + 2 * n
end

-- Drop the oldest n of a stream's len events (all of them: the stream), with their bookkeeping.
local function drop_oldest(session, stream, n, len)
  if n == len then
    redis.call('DEL', stream)
    forget(session, stream)
    return
  end
  local freed = 0
  for _, size in ipairs(oldest_sizes(stream, n)) do freed = freed + size end
  redis.call('XTRIM', stream, 'MAXLEN', '=', len - n)
  redis.call('HSET', lengths, stream, len - n)
  add_kept(session, -n)
  add_bytes(stream, -freed)
  add_bytes(session, -freed)
  redis.call('ZADD', session, first_ms(stream), stream)
end

-- Session byte cap: evict the session's oldest events until what it keeps fits in byte_cap.
local function enforce_byte_cap(session)
  local over, rounds = bytes_of(session) - byte_cap, 0
  while byte_cap > 0 and over > 0 and rounds < 64 do
    rounds = rounds + 1
    local oldest = redis.call('ZRANGE', session, 0, 0)[1]
    if not oldest then break end
    local len, n, freed = redis.call('XLEN', oldest), 0, 0
    if len == 0 then
      counts.ttl = counts.ttl + forget(session, oldest)
    else
      for _, size in ipairs(oldest_sizes(oldest, 64)) do
        if freed >= over then break end
        n, freed = n + 1, freed + size
      end
      drop_oldest(session, oldest, n, len)
      counts.session_cap = counts.session_cap + n
    end
    over = bytes_of(session) - byte_cap
  end
end

-- Evict from the stream holding the session's oldest event until the session fits.
local function enforce_cap(session)
  local excess, rounds = kept(session) - cap, 0
  while excess > 0 and rounds < 64 do
    rounds = rounds + 1
    local oldest = redis.call('ZRANGE', session, 0, 0)[1]
    if not oldest then break end
    local len = redis.call('XLEN', oldest)
    if len == 0 then
      local lost = forget(session, oldest)
      counts.ttl, excess = counts.ttl + lost, excess - lost
    else
      local n = math.min(excess, len)
      drop_oldest(session, oldest, n, len)
      counts.session_cap, excess = counts.session_cap + n, excess - n
    end
  end
end

sweep()
local ids, sessions, i = {}, {}, 6
while i <= #ARGV do i = append(i, ids, sessions) end
for session in pairs(sessions) do
  enforce_cap(session)
  enforce_byte_cap(session)
end
for _, reason in ipairs({'capacity', 'ttl', 'session_cap'}) do
  if counts[reason] > 0 then redis.call('HINCRBY', metrics, 'events_evicted:' .. reason, counts[reason]) end
end
local delta = counts.appended - counts.capacity - counts.ttl - counts.session_cap
if counts.appended > 0 then redis.call('HINCRBY', metrics, 'events_appended', counts.appended) end
if delta ~= 0 then redis.call('HINCRBY', metrics, 'buffer_entries', delta) end
return ids
"""

DELETE_LUA = """
-- KEYS: metrics hash, lengths hash, expiries zset, the session's streams zset.
local metrics, lengths, expiries, session = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dropped = 0
for _, stream in ipairs(redis.call('ZRANGE', session, 0, -1)) do
  dropped = dropped + tonumber(redis.call('HGET', lengths, stream) or '0')
  redis.call('DEL', stream)
  redis.call('HDEL', lengths, stream, 'b|' .. stream)
  redis.call('ZREM', expiries, session .. '|' .. stream)
end
redis.call('DEL', session)
redis.call('HDEL', lengths, session, 'b|' .. session)
if dropped > 0 then
  redis.call('HINCRBY', metrics, 'events_deleted', dropped)
  redis.call('HINCRBY', metrics, 'buffer_entries', -dropped)
end
return dropped
"""


def _script_args(store, names, items):
    """ARGV for APPEND_LUA, with items grouped by stream (keeping their order inside each
    stream), and the index in ``items`` of each event in script order."""
    groups = defaultdict(list)
    for index, item in enumerate(items):
        groups[item.session_id, item.stream_key].append(index)
    args = [store.maxlen, store.ttl, store.session_max_events, "~" if store.approximate_trim else "=",
            store.session_max_bytes or 0]
    order = []
    for (session_id, stream_key), indexes in groups.items():
        args += [names.stream(session_id, stream_key), names.session_streams(session_id),
                 names.bell(session_id, stream_key), names.names.closed(session_id), len(indexes)]
        for index in indexes:
            args += [items[index].data, "1" if items[index].final else ""]
        order += indexes
    return args, order
