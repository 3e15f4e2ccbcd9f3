import SIMPRedis

/// The key directory's scripts (docs/E2EE.md, Part 2; `KeyFlow`). Every key is one user's
/// (`Keys.identity`, `deviceCertificates`, `keyPackages`, `lastResortKeyPackages`): one slot.
/// A device's one-time packages are the range "[DEVICE\0" to "(DEVICE\1" of the sorted set.
extension Scripts {
    /// Sets the identity key. KEYS: identity, certificates, KeyPackages, last-resort KeyPackages,
    /// revoked certificates.
    /// ARGV: the key, "1" to replace one stored, now (ms). Returns 0 (the same key: nothing
    /// changed), 1 (stored), -1 (another key is stored and ARGV[2] is not "1"). A replaced
    /// identity ends every certificate and KeyPackage of the user, and the revoked certificates
    /// (KEYS[5]): the old key certified them, and none verifies under the new one.
    static let publishIdentity = RedisScript("""
    local current = redis.call('HGET', KEYS[1], 'key')
    if current == ARGV[1] then return 0 end
    if current and ARGV[2] ~= '1' then return -1 end
    redis.call('HSET', KEYS[1], 'key', ARGV[1], 'since', ARGV[3])
    if current then redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5]) end
    return 1
    """)

    /// Stores a device certificate, checked against the identity key ARGV[3]. KEYS: identity,
    /// certificates, KeyPackages, last-resort KeyPackages, revoked certificates. ARGV: device, certificate (key and
    /// signature), the identity key checked against, the most certificates a user may have, now
    /// (ms). Returns 0, -1 (the identity is not ARGV[3] any more), -2 (a new device past the
    /// bound). A device whose key changes loses its KeyPackages (the old key signed them), and
    /// its old certificate moves to the revoked ones (KEYS[5]), out of which the new one is taken.
    static let publishDevice = RedisScript(keepRevokedCertificate + """
    if redis.call('HGET', KEYS[1], 'key') ~= ARGV[3] then return -1 end
    local old = redis.call('HGET', KEYS[2], ARGV[1])
    if not old and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return -2 end
    if old and string.sub(old, 1, 32) ~= string.sub(ARGV[2], 1, 32) then
      redis.call('ZREMRANGEBYLEX', KEYS[3], '[' .. ARGV[1] .. '\\0', '(' .. ARGV[1] .. '\\1')
      redis.call('HDEL', KEYS[4], ARGV[1])
      keeprevoked(KEYS[5], ARGV[1], old, ARGV[5])
    end
    -- A certificate current again is no longer listed as revoked.
    redis.call('ZREM', KEYS[5], ARGV[1] .. '\\0' .. ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
    return 0
    """)

    /// Adds a device's KeyPackages, checked against its certificate ARGV[2]. KEYS: certificates,
    /// KeyPackages, last-resort KeyPackages. ARGV: device, certificate, the pool's bound per
    /// device, the last-resort package ('' to keep the one stored), then the one-time packages.
    /// Returns {status, the device's one-time packages, 1 if it has a last-resort one, 1 if this
    /// upload stored its first last-resort one (once per certificate: it is never handed out for
    /// good, and goes only with the certificate; a client uploads it with its first packages)}: status
    /// 0, -1 (the certificate is not ARGV[2] any more), -2 (over the bound: nothing stored).
    static let uploadKeyPackages = RedisScript("""
    local device = ARGV[1]
    if redis.call('HGET', KEYS[1], device) ~= ARGV[2] then return {-1, 0, 0, 0} end
    local have = redis.call('ZLEXCOUNT', KEYS[2], '[' .. device .. '\\0', '(' .. device .. '\\1')
    local had = redis.call('HEXISTS', KEYS[3], device) == 1
    local new = 0
    for i = 5, #ARGV do
      if not redis.call('ZSCORE', KEYS[2], device .. '\\0' .. ARGV[i]) then new = new + 1 end
    end
    if have + new > tonumber(ARGV[3]) then return {-2, have, redis.call('HEXISTS', KEYS[3], device), 0} end
    for i = 5, #ARGV do redis.call('ZADD', KEYS[2], 0, device .. '\\0' .. ARGV[i]) end
    if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], device, ARGV[4]) end
    local last = redis.call('HEXISTS', KEYS[3], device)
    local addable = 0
    if not had and last == 1 then addable = 1 end
    return {0, have + new, last, addable}
    """)

    /// One KeyPackage per certified device of the user but ARGV[1]: a one-time package, removed,
    /// or the last-resort one, kept. KEYS: certificates, KeyPackages, last-resort KeyPackages,
    /// the claimer's count of one-time packages taken this hour. ARGV: the device left out, the
    /// most one-time packages the claimer may take in an hour (-1: no bound); past it, only
    /// last-resort packages. Returns a flat list of {device, package, 1 if last resort}, by
    /// device name; a device with neither is left out.
    static let claimKeyPackages = RedisScript("""
    local devices = redis.call('HKEYS', KEYS[1])
    table.sort(devices)
    local out = {}
    local bound = tonumber(ARGV[2])
    local taken = tonumber(redis.call('GET', KEYS[4]) or '0')
    local before = taken
    for _, device in ipairs(devices) do
      if device ~= ARGV[1] then
        local first = {}
        if bound < 0 or taken < bound then
          first = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. device .. '\\0', '(' .. device .. '\\1', 'LIMIT', 0, 1)
        end
        if first[1] then
          taken = taken + 1
          redis.call('ZREM', KEYS[2], first[1])
          table.insert(out, device)
          table.insert(out, string.sub(first[1], #device + 2))
          table.insert(out, 0)
        else
          local last = redis.call('HGET', KEYS[3], device)
          if last then
            table.insert(out, device)
            table.insert(out, last)
            table.insert(out, 1)
          end
        end
      end
    end
    if bound >= 0 and taken > before then
      if before == 0 then redis.call('SET', KEYS[4], taken, 'EX', 3600) else redis.call('SET', KEYS[4], taken, 'KEEPTTL') end
    end
    return out
    """)
}
