-- Read release (see rwlock_read.lua): one read level down. While others still hold the hash,
-- its expiry becomes the longest remaining reader's; the last release deletes it.
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms (unused), ARGV[3] = release message;
-- with KEYS[2] (the release channel of notify waiters), a final release publishes ARGV[3].
-- Returns -1 if not ours (expired, maybe taken), 0 if still held, 1 if released.
local function publish()
  if KEYS[2] then
    redis.call('PUBLISH', KEYS[2], ARGV[3])
  end
end
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  -- Gone (expired): waiters may try again.
  publish()
  return -1
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('DEL', KEYS[1] .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. (n + 1))
if redis.call('HLEN', KEYS[1]) > 1 then
  -- Others hold it: keep the hash as long as the longest remaining read level.
  local longest = -3
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    local count = tonumber(redis.call('HGET', KEYS[1], field))
    if count then
      for level = count, 1, -1 do
        local key = KEYS[1] .. ':' .. field .. ':rwlock_timeout:' .. level
        longest = math.max(longest, redis.call('PTTL', key))
      end
    end
  end
  if longest > 0 then
    redis.call('PEXPIRE', KEYS[1], longest)
    return 0
  end
  if mode == 'write' then
    -- Our read was taken under our own write lock, which is still held.
    return 0
  end
end
redis.call('DEL', KEYS[1])
publish()
return 1
