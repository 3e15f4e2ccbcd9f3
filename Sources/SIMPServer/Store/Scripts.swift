import SIMPRedis

/// The Lua scripts that make each store operation atomic in Redis.
enum Scripts {
    /// Stores several messages for ONE recipient in one call (a script call costs Redis about
    /// 10 µs of its own, more than the commands it runs). KEYS: the recipient's user, seq,
    /// inbox and confirmed mark, then per message the ids its sender stored in this inbox and
    /// the conversation's history. ARGV: id TTL, history cap, inbox limit, a sender's share
    /// of the inbox, ids kept per sender, then per message its id and its bytes.
    /// Each message is stored unless its sender's id was seen before; its sequence number is
    /// appended to the serialized protobuf as field 10 (varint): a later occurrence of a scalar
    /// field wins, so the stored bytes carry their seq (the caller appends the same bytes).
    /// Returns per message {1, seq} stored, {0, seq, confirmed} duplicate (with the confirmed
    /// mark, so a resent message already delivered is answered as such), {-1} unknown
    /// recipient, {-2} inbox full, {-3} the sender's share of the inbox full. History grows
    /// 10% past its cap before it is trimmed; a sender's ids past theirs, oldest first.
    static let store = RedisScript("""
    local known = redis.call('EXISTS', KEYS[1]) == 1
    local ttl, cap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
    local share, idcap = tonumber(ARGV[4]), tonumber(ARGV[5])
    local slack = cap + math.floor(cap / 10)
    local confirmed = tonumber(redis.call('GET', KEYS[4]) or '0')
    local count = nil
    local out = {}
    local n = 0
    for i = 6, #ARGV, 2 do
      n = n + 1
      local ids, hist, id = KEYS[3 + 2 * n], KEYS[4 + 2 * n], ARGV[i]
      local prior = redis.call('ZSCORE', ids, id)
      if prior then
        out[n] = {0, tonumber(prior), confirmed}
      elseif not known then
        out[n] = {-1}
      else
        count = count or redis.call('ZCARD', KEYS[3])
        if count >= limit then
          out[n] = {-2}
        elseif redis.call('ZCOUNT', ids, '(' .. confirmed, '+inf') >= share then
          out[n] = {-3}
        else
          local seq = redis.call('INCR', KEYS[2])
          local v = seq
          local tail = {string.char(0x50)}
          while v >= 128 do
            table.insert(tail, string.char(v % 128 + 128))
            v = math.floor(v / 128)
          end
          table.insert(tail, string.char(v))
          local stored = ARGV[i + 1] .. table.concat(tail)
          redis.call('ZADD', KEYS[3], seq, stored)
          count = count + 1
          if redis.call('RPUSH', hist, stored) > slack then redis.call('LTRIM', hist, -cap, -1) end
          if redis.call('ZADD', ids, seq, id) > 0 and redis.call('ZCARD', ids) > idcap then
            redis.call('ZREMRANGEBYRANK', ids, 0, -idcap - 1)
          end
          redis.call('EXPIRE', ids, ttl)
          out[n] = {1, seq}
        end
      end
    end
    return out
    """)

    /// Cumulative receipt: removes inbox entries up to ARGV[1] (clamped to the last assigned
    /// seq) and raises the confirmed mark. Returns the removed entries when ARGV[2] is 1 (the
    /// caller does not know every confirmed message's sender), else how many were removed.
    static let ack = RedisScript("""
    local top = tonumber(redis.call('GET', KEYS[3]) or '0')
    local upto = math.min(tonumber(ARGV[1]), top)
    local items = nil
    if ARGV[2] == '1' then items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto) end
    local removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', upto)
    local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
    if upto > cur then redis.call('SET', KEYS[2], upto) end
    return items or removed
    """)

    /// Creates an account only if the name is free. Returns 1 created, 0 taken.
    static let register = RedisScript("""
    if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
    redis.call('HSET', KEYS[1], 'salt', ARGV[1], 'hash', ARGV[2], 'kdf', ARGV[3])
    return 1
    """)

    /// Counts one event in each key's fixed window: the window (ARGV[1] ms) starts with the
    /// key's first count and is not extended by later ones, so a slow stream of events cannot
    /// keep a count alive. Returns {count, ms left in the window} per key.
    static let countInWindow = RedisScript("""
    local out = {}
    for i, key in ipairs(KEYS) do
      local n = redis.call('INCR', key)
      local left = redis.call('PTTL', key)
      if left < 0 then
        redis.call('PEXPIRE', key, ARGV[1])
        left = tonumber(ARGV[1])
      end
      out[#out + 1] = n
      out[#out + 1] = left
    end
    return out
    """)

    /// Removes presence only if it still names this session (a newer one may have replaced it).
    static let clearPresence = RedisScript("""
    if redis.call('HGET', KEYS[1], 'session') == ARGV[1] then redis.call('DEL', KEYS[1]) end
    return 1
    """)
}
