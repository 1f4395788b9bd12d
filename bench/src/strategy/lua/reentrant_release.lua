-- Reentrant release: one level down; the key goes when the count reaches zero.
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms; with KEYS[2] (the release channel
-- of notify waiters), the final release is published there.
-- Returns -1 if not ours (expired, maybe taken), 0 if still held, 1 if released.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('DEL', KEYS[1])
if KEYS[2] then
  redis.call('PUBLISH', KEYS[2], ARGV[1])
end
return 1
