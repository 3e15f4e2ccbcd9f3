local known = redis.call('EXISTS', KEYS[1])
local top = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('ZMSCORE', KEYS[4], ARGV[1])
top = top + 1
redis.call('SET', KEYS[2], top)
redis.call('ZADD', KEYS[3], top, ARGV[2] .. top)
if redis.call('ZCARD', KEYS[3]) > 11000 then redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -10001) end
redis.call('ZADD', KEYS[4], top, ARGV[1])
redis.call('EXPIRE', KEYS[4], 86400)
redis.call('HVALS', KEYS[5])
return top
