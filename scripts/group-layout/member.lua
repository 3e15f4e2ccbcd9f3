local known = redis.call('EXISTS', KEYS[1])
local confirmed = tonumber(redis.call('GET', KEYS[4]) or '0')
local top = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('HGET', KEYS[5], 'run')
redis.call('ZMSCORE', KEYS[7], ARGV[1])
redis.call('ZCOUNT', KEYS[3], '(' .. confirmed, '+inf')
redis.call('ZCOUNT', KEYS[7], '(' .. confirmed, '+inf')
top = top + 1
redis.call('SET', KEYS[2], top)
redis.call('ZADD', KEYS[3], top, ARGV[2] .. top)
if redis.call('RPUSH', KEYS[8], ARGV[2]) > 1100 then redis.call('LTRIM', KEYS[8], -1000, -1) end
redis.call('ZADD', KEYS[7], top, ARGV[1])
redis.call('EXPIRE', KEYS[7], 86400)
redis.call('HVALS', KEYS[6])
-- the member confirms it later: one ack per message at worst
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', top - 1)
return top
