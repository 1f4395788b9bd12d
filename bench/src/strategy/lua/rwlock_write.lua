-- Write lock of a read–write lock (see rwlock_read.lua): taken only when the key is free, or
-- re-entered by its write holder (each level adds a lease time, as Redisson does).
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms. Returns the new write count (> 0),
-- or, when others hold it, minus its remaining ms (0: no expiry).
local writer = ARGV[1] .. ':write'
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  redis.call('HSET', KEYS[1], 'mode', 'write', writer, 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if mode == 'write' and redis.call('HEXISTS', KEYS[1], writer) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], writer, 1)
  redis.call('PEXPIRE', KEYS[1], redis.call('PTTL', KEYS[1]) + ARGV[2])
  return n
end
return -math.max(redis.call('PTTL', KEYS[1]), 0)
