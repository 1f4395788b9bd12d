-- BROKEN ON PURPOSE (the redis-rwlock-leaky-read control): rwlock_read.lua with the writer
-- check forgotten. It only makes sure readers share, so a read is granted while a writer holds
-- the key. Writers still exclude readers and each other (rwlock_write.lua is unchanged).
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms. Returns the owner's read count.
if redis.call('HGET', KEYS[1], 'mode') == false then
  redis.call('HSET', KEYS[1], 'mode', 'read')
end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('SET', KEYS[1] .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. n, 1, 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2])))
return n
