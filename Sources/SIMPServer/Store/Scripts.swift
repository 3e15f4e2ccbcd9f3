import SIMPRedis

/// The Lua scripts that make each store operation atomic in Redis.
enum Scripts {
    /// Stores one message in the recipient's inbox unless the sender's id was seen before.
    /// The sequence number is appended to the serialized protobuf as field 10 (varint):
    /// a later occurrence of a scalar field wins, so the stored bytes carry their seq.
    /// Returns {1, seq, bytes} stored, {0, seq, confirmed} duplicate (with the recipient's
    /// confirmed mark, so a resent message that was already delivered is answered as such),
    /// {-1} unknown recipient, {-2} inbox full.
    static let store = RedisScript("""
    local prior = redis.call('GET', KEYS[1])
    if prior then return {0, tonumber(prior), tonumber(redis.call('GET', KEYS[6]) or '0')} end
    if redis.call('EXISTS', KEYS[2]) == 0 then return {-1} end
    if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[4]) then return {-2} end
    local seq = redis.call('INCR', KEYS[3])
    local v = seq
    local out = {string.char(0x50)}
    while v >= 128 do
      table.insert(out, string.char(v % 128 + 128))
      v = math.floor(v / 128)
    end
    table.insert(out, string.char(v))
    local stored = ARGV[1] .. table.concat(out)
    redis.call('ZADD', KEYS[4], seq, stored)
    if redis.call('RPUSH', KEYS[5], stored) > tonumber(ARGV[3]) then
      redis.call('LTRIM', KEYS[5], -tonumber(ARGV[3]), -1)
    end
    redis.call('SET', KEYS[1], seq, 'EX', tonumber(ARGV[2]))
    return {1, seq, stored}
    """)

    /// Cumulative receipt: removes inbox entries up to ARGV[1] (clamped to the last assigned
    /// seq), raises the confirmed mark, and returns the removed entries.
    static let ack = RedisScript("""
    local top = tonumber(redis.call('GET', KEYS[3]) or '0')
    local upto = math.min(tonumber(ARGV[1]), top)
    local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto)
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', upto)
    local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
    if upto > cur then redis.call('SET', KEYS[2], upto) end
    return items
    """)

    /// Creates an account only if the name is free. Returns 1 created, 0 taken.
    static let register = RedisScript("""
    if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
    redis.call('HSET', KEYS[1], 'salt', ARGV[1], 'hash', ARGV[2], 'kdf', ARGV[3])
    return 1
    """)

    /// Removes presence only if it still names this session (a newer one may have replaced it).
    static let clearPresence = RedisScript("""
    if redis.call('HGET', KEYS[1], 'session') == ARGV[1] then redis.call('DEL', KEYS[1]) end
    return 1
    """)
}
