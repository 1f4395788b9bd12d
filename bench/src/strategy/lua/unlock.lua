-- Compare-and-delete unlock: KEYS[1] = lock key, ARGV[1] = owner token. With KEYS[2] (the
-- release channel of notify waiters), the release is published there.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call('PUBLISH', KEYS[2], ARGV[1])
  end
  return 1
end
return 0
