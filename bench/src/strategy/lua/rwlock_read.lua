-- Read lock of a read–write lock (Redisson's RReadWriteLock layout). The hash at KEYS[1] holds
-- `mode` (read / write) and one field per holder with its count; a write holder's field is
-- `<owner>:write`. Each read level also has its own timeout key
-- `<KEYS[1]>:<owner>:rwlock_timeout:<level>`, so the release of one reader can set the hash's
-- expiry to the longest remaining reader's.
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms. Returns the owner's new read count
-- (> 0), or, when a writer holds it, minus its remaining ms (0: no expiry).
local mode = redis.call('HGET', KEYS[1], 'mode')
-- Readers share; a writer excludes every reader but itself (it may read what it writes).
if mode == false or mode == 'read'
    or (mode == 'write' and redis.call('HEXISTS', KEYS[1], ARGV[1] .. ':write') == 1) then
  if mode == false then
    redis.call('HSET', KEYS[1], 'mode', 'read')
  end
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('SET', KEYS[1] .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. n, 1, 'PX', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2])))
  return n
end
return -math.max(redis.call('PTTL', KEYS[1]), 0)
