-- redis-lua-decr with [buyers]: KEYS[1] = stock, KEYS[2] = orders list, KEYS[3] = request ids
-- seen (SET), KEYS[4] = holdings (HASH buyer -> units), all in the SKU's slot; ARGV[1] = buyer,
-- ARGV[2] = request, ARGV[3] = units, ARGV[4] = limit (0: not checked, the -no-limit control).
-- Returns 1 sold, 0 sold out (fewer units left than asked: all or nothing), -1 over the
-- limit, -2 a request already placed. Checked in strategy/rules.rs's order.
if redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then return -2 end
local qty = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
if limit > 0 and tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0') + qty > limit then
  return -1
end
local s = tonumber(redis.call('GET', KEYS[1]))
if s == nil or s < qty then return 0 end
redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[4], ARGV[1], qty)
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3])
return 1
