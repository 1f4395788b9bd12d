-- Reentrant lock (hash owner -> count): take it if free, or re-enter if already ours.
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms. Returns the new count (> 0), or,
-- when another owner holds it, minus its remaining ms (0: no expiry), which is how long a
-- notify waiter waits at most.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return n
end
return -math.max(redis.call('PTTL', KEYS[1]), 0)
