-- Write release (see rwlock_write.lua): one write level down. The last level frees the key,
-- unless the writer also holds read levels: then the lock stays, in read mode.
-- KEYS[1] = lock key, ARGV[1] = owner, ARGV[2] = ttl in ms, ARGV[3] = release message; with
-- KEYS[2] (the release channel of notify waiters), freeing the key publishes ARGV[3].
-- Returns -1 if not ours (expired, maybe taken), 0 if still held, 1 if released.
local writer = ARGV[1] .. ':write'
local mode = redis.call('HGET', KEYS[1], 'mode')
if mode == false then
  if KEYS[2] then
    redis.call('PUBLISH', KEYS[2], ARGV[3])
  end
  return -1
end
if mode ~= 'write' or redis.call('HEXISTS', KEYS[1], writer) == 0 then
  return -1
end
if redis.call('HINCRBY', KEYS[1], writer, -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('HDEL', KEYS[1], writer)
if redis.call('HLEN', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call('PUBLISH', KEYS[2], ARGV[3])
  end
else
  redis.call('HSET', KEYS[1], 'mode', 'read')
end
return 1
