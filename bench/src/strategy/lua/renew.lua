-- Watchdog renewal: extend the lease only while it is still ours.
-- KEYS[1] = lock key, ARGV[1] = owner token, ARGV[2] = ttl in ms. Returns 1 if renewed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
