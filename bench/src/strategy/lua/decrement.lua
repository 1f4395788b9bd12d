-- redis-lua-decr: KEYS[1] = stock, KEYS[2] = orders list, ARGV[1] = buyer.
-- Returns 1 if sold, 0 if sold out. Also loaded by scripts/bench-overhead.sh.
local s = tonumber(redis.call('GET', KEYS[1]))
if s == nil or s <= 0 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
