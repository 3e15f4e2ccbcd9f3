import SIMPRedis

/// The Lua scripts that make each store operation atomic in Redis.
enum Scripts {
    /// Stores several messages for ONE recipient in one call (a script call costs Redis about
    /// 10 µs of its own, more than the commands it runs). KEYS: the recipient's user, seq,
    /// inbox, confirmed mark, numbering record, presence, contacts, blocked users, settings and
    /// group copies (which the limits do not count: `groupDeliver` bounds them apart; copies
    /// made while the inbox was shallow are not recorded, so they count, at most 64 of them),
    /// then per message the ids its sender stored in this inbox, the conversation's history in
    /// the recipient's slot, and the sender's copy of that history (the same key when the
    /// sender's copy is written by the caller: in a cluster it is in another slot). ARGV: id TTL, history cap,
    /// inbox limit, a sender's share of the inbox, ids kept per sender, the recipient's
    /// numbering floor (the highest seq its connected session has seen; -1 when no session of
    /// it is connected), Redis' run id, this node's id, the replicas a new message needs online
    /// (`--redis-min-replicas`) and the lag in seconds up to which one counts as online, then
    /// per message its id, its bytes and the sender the recipient's filters apply to ('' for
    /// none: a copy for the sender's own devices, a notice of the server's; '-' for none, and
    /// not kept in the history either: a read receipt; `!SENDER` for a notice about SENDER
    /// that only the recipient's blocks refuse, not kept in the history). A message from a
    /// sender the recipient blocked, or from a non-contact while the recipient takes messages
    /// from contacts only, is not stored ({-7}, kept as a failure like the inbox's). A new message is not stored while fewer replicas are
    /// online than it needs (INFO replication): WAIT could only find it unreplicated, and a
    /// message written but not replicated can neither be accepted nor taken back.
    /// When it stored something for a recipient whose presence names another node, each stored
    /// message's answer names that node, so the caller tells it (`NodeNotice.inbox`; in the
    /// script a PUBLISH would go to every node of a cluster, and the notice to another slot).
    /// Numbering never runs backwards: a seq below the floor was lost by Redis (the tail of
    /// its AOF), so numbering goes on above the floor. When Redis has restarted since this
    /// recipient's last store and nobody connected knows its floor, the numbering record keeps
    /// the seq it restarted from (`base`): the recipient's next CONNECT moves what was stored
    /// above it past what the client had seen (`Scripts.renumber`).
    /// Each message is stored unless its sender's id was seen before; its sequence number is
    /// appended to the serialized protobuf as field 10 (varint): a later occurrence of a scalar
    /// field wins, so the stored bytes carry their seq (the caller appends the same bytes).
    /// Returns per message {1, seq, depth, node...} stored (depth: the inbox's unconfirmed entries after it, counted as the seqs above the confirmed mark while those are below the limits; nodes: where the recipient's devices are, other than this one), {0, seq, confirmed, node...} duplicate (with the confirmed
    /// mark, so a resent message already delivered is answered as such), {-1} unknown
    /// recipient, {-2} inbox full, {-3} the sender's share of the inbox full, {-4} not stored
    /// before (for a message sent with no bytes: a late resend, to be answered, never stored),
    /// {-5, online} not stored: too few replicas online, {-7} refused by the recipient's
    /// filters (NOT_A_CONTACT). History
    /// and a sender's ids grow 10% past their caps before they are trimmed, oldest first (a trim
    /// on every call was the most expensive command the script ran).
    static let store = RedisScript(seqField + numberingRun + onlineReplicas + presenceNodes + """
    local ttl, cap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
    local share, idcap, floor = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
    local slack = cap + math.floor(cap / 10)
    local idslack = idcap + math.floor(idcap / 10)
    -- One command for both: each command a script runs costs Redis a few microseconds of its own.
    local marks = redis.call('MGET', KEYS[4], KEYS[2])
    local confirmed, top = tonumber(marks[1] or '0'), tonumber(marks[2] or '0')
    numberingrun(KEYS[5], floor, ARGV[7], top)
    local first = top
    if floor > top then top = floor end
    -- Accounts are never deleted, so a user with a seq exists (a deletion would have to remove
    -- the seq too).
    local known = nil
    local function exists()
      if known == nil then known = first > 0 or redis.call('EXISTS', KEYS[1]) == 1 end
      return known
    end
    -- Entries above the confirmed mark, counted only when needed: each has its own seq above
    -- the mark, so until the seqs assigned above it reach a limit, no limit is reached (each
    -- ZCOUNT a store ran cost Redis as much as a write's Lua around it). `depth` is exact once
    -- counted, else that bound (equal unless numbering jumped past a floor).
    local inbox = {}
    local depth, counted = top - confirmed, false
    local function count()
      if not counted then
        depth = redis.call('ZCOUNT', KEYS[3], '(' .. confirmed, '+inf') - redis.call('ZCOUNT', KEYS[10], '(' .. confirmed, '+inf')
          + #inbox / 2
        counted = true
      end
    end
    local need, maxlag, online = tonumber(ARGV[9]), tonumber(ARGV[10]), nil
    local function short()
      online = online or onlinereplicas(maxlag)
      return online < need
    end
    -- Writes are gathered and made once per key at the end: a command costs Redis more than
    -- the Lua around it. `stored` answers a second copy of an id within this call (a key has
    -- no space, so key .. " " .. id names one pair).
    local out, n = {}, 0
    local stored, mine, added = {}, {}, {}
    local lists, listKeys, idArgs, idKeys = {}, {}, {}, {}
    local function historyentry(key, bytes)
      if not lists[key] then lists[key] = {}; table.insert(listKeys, key) end
      table.insert(lists[key], bytes)
    end
    -- Which ids each sender stored before: one ZMSCORE per sender, not a ZSCORE per message.
    local priors, asked, askedKeys = {}, {}, {}
    -- A failure is kept as the id's score, minus the error code (INBOX_FULL 14, INBOX_SHARE_FULL
    -- 21), so a resend whose sender never heard of it is answered the same, not stored after
    -- later messages. Below every seq: trimmed first, and never counted in a share.
    local function failed(ids, id, code)
      if not idArgs[ids] then idArgs[ids] = {}; table.insert(idKeys, ids) end
      table.insert(idArgs[ids], -code)
      table.insert(idArgs[ids], id)
      stored[ids .. ' ' .. id] = -code
    end
    -- The recipient's filters are read once per call, and per sender only when it has any.
    local blocks, only, refusals, readsoff = nil, nil, {}, nil
    local function refuses(flag)
      if flag == '' or flag == '-' then return false end
      if blocks == nil then
        blocks = redis.call('SCARD', KEYS[8]) > 0
        only = redis.call('HGET', KEYS[9], 'contacts-only') == 'on'
      end
      -- `!SENDER`: a notice of the server's about SENDER, refused by a block only.
      if string.sub(flag, 1, 1) == '!' then
        return blocks and redis.call('SISMEMBER', KEYS[8], string.sub(flag, 2)) == 1
      end
      local sender = flag
      -- `~SENDER`: a sealed read receipt, refused by the read-receipts setting too.
      if string.sub(flag, 1, 1) == '~' then
        sender = string.sub(flag, 2)
        if readsoff == nil then readsoff = redis.call('HGET', KEYS[9], 'read-receipts') == 'off' end
        if readsoff then return true end
      end
      if refusals[sender] == nil then
        -- `~SENDER#GROUP`: a group's sealed read receipt, refused unless the recipient is a
        -- member of GROUP (its groups record, "MARK 1", the last key); contacts-only does not
        -- apply, as to the group's messages.
        local hash = string.find(sender, '#', 1, true)
        if hash then
          local who, record = string.sub(sender, 1, hash - 1), redis.call('HGET', KEYS[#KEYS], string.sub(sender, hash + 1))
          refusals[sender] = (blocks and redis.call('SISMEMBER', KEYS[8], who) == 1)
            or not record or string.sub(record, -2) ~= ' 1'
        else
          refusals[sender] = (blocks and redis.call('SISMEMBER', KEYS[8], sender) == 1)
            or (only and redis.call('HGET', KEYS[7], sender) ~= 'contact')
        end
      end
      return refusals[sender]
    end
    for i = 11, #ARGV, 3 do
      n = n + 1
      local ids = KEYS[8 + 3 * n]
      if not asked[ids] then asked[ids] = {}; table.insert(askedKeys, ids) end
      table.insert(asked[ids], ARGV[i])
    end
    for _, ids in ipairs(askedKeys) do
      local scores, known = redis.call('ZMSCORE', ids, unpack(asked[ids])), {}
      for k, id in ipairs(asked[ids]) do
        if scores[k] then known[id] = scores[k] end
      end
      priors[ids] = known
    end
    n = 0
    for i = 11, #ARGV, 3 do
      n = n + 1
      local ids, hist, copy, id = KEYS[8 + 3 * n], KEYS[9 + 3 * n], KEYS[10 + 3 * n], ARGV[i]
      local prior = tonumber(stored[ids .. ' ' .. id] or priors[ids][id])
      if prior and prior < 0 then
        out[n] = {-6, -prior}
      elseif prior then
        out[n] = {0, prior, confirmed}
      elseif ARGV[i + 1] == '' then
        out[n] = {-4}
      elseif not exists() then
        out[n] = {-1}
      elseif need > 0 and short() then
        out[n] = {-5, online}
      elseif refuses(ARGV[i + 2]) then
        out[n] = {-7}
        failed(ids, id, 32)
      else
        -- Entries kept only for a device behind the others do not fill the inbox (`ack`).
        -- A sender's entries are among them: its share is counted only once they reach it.
        if depth >= limit then count() end
        if depth >= share and not mine[ids] then
          mine[ids] = redis.call('ZCOUNT', ids, '(' .. confirmed, '+inf')
        end
        if depth >= limit then
          out[n] = {-2}
          failed(ids, id, 14)
        elseif depth >= share and mine[ids] + (added[ids] or 0) >= share then
          out[n] = {-3}
          failed(ids, id, 21)
        else
          top = top + 1
          local bytes = ARGV[i + 1] .. seqfield(top)
          table.insert(inbox, top)
          table.insert(inbox, bytes)
          local flag = string.sub(ARGV[i + 2], 1, 1)
          if flag ~= '-' and flag ~= '~' and flag ~= '!' then
            historyentry(hist, bytes)
            if copy ~= hist then historyentry(copy, bytes) end
          end
          if not idArgs[ids] then idArgs[ids] = {}; table.insert(idKeys, ids) end
          table.insert(idArgs[ids], top)
          table.insert(idArgs[ids], id)
          stored[ids .. ' ' .. id] = top
          depth = depth + 1
          added[ids] = (added[ids] or 0) + 1
          out[n] = {1, top, depth}
        end
      end
    end
    if top ~= first then redis.call('SET', KEYS[2], top) end
    if #inbox > 0 then redis.call('ZADD', KEYS[3], unpack(inbox)) end
    for _, hist in ipairs(listKeys) do
      if redis.call('RPUSH', hist, unpack(lists[hist])) > slack then redis.call('LTRIM', hist, -cap, -1) end
    end
    for _, ids in ipairs(idKeys) do
      if redis.call('ZADD', ids, unpack(idArgs[ids])) > 0 and redis.call('ZCARD', ids) > idslack then
        redis.call('ZREMRANGEBYRANK', ids, 0, -idcap - 1)
      end
      -- Renewed with a 1/24 slack (an hour of a day), not on every call (a read costs less than
      -- a propagated write): every id still lives at least the TTL.
      if redis.call('TTL', ids) < ttl then redis.call('EXPIRE', ids, ttl + math.floor(ttl / 24)) end
    end
    -- A duplicate not yet confirmed is named too: it may be the retry of a store whose first
    -- answer was lost (or not replicated in time), and nobody has told that node yet.
    local nodes = nil
    for _, answer in ipairs(out) do
      if answer[1] == 1 or (answer[1] == 0 and answer[3] < answer[2]) then
        nodes = nodes or presencenodes(KEYS[6], ARGV[8])
        for _, node in ipairs(nodes) do table.insert(answer, node) end
      end
    end
    return out
    """)

    /// Keeps a final failure the store script did not decide (a wait for replicas that ran out)
    /// as the id's score, minus the error code, like the store script's own (ARGV: id, code, ttl).
    static let markFailed = RedisScript("""
    if redis.call('ZADD', KEYS[1], 'NX', -tonumber(ARGV[2]), ARGV[1]) == 1 and redis.call('TTL', KEYS[1]) < 0 then
      redis.call('EXPIRE', KEYS[1], ARGV[3])
    end
    return 1
    """)

    /// How many replicas the node it runs on has online (ARGV[1]: the lag up to which one counts).
    static let replicasOnline = RedisScript(onlineReplicas + """
    return onlinereplicas(tonumber(ARGV[1]))
    """)

    /// Lua: how many replicas are online with their last acknowledgement at most `maxlag`
    /// seconds old (INFO replication's `slaveN:` lines).
    static let onlineReplicas = """
    local function onlinereplicas(maxlag)
      local online = 0
      for lag in string.gmatch(redis.call('INFO', 'replication'), 'state=online,offset=%d+,lag=(%d+)') do
        if tonumber(lag) <= maxlag then online = online + 1 end
      end
      return online
    end

    """

    /// Lua: protobuf field 10 (varint) holding `seq`, to append to a stored message.
    /// Lua: at the first store into an inbox since Redis (re)started (its run id differs from
    /// the one recorded), the seq numbering went on from is recorded as `base` unless a session
    /// here knows the floor (`floor` >= 0), for the next CONNECT to check (`numberingCheck`).
    static let numberingRun = """
    local function numberingrun(key, floor, run, top)
      if redis.call('HGET', key, 'run') == run then return end
      if floor >= 0 then
        redis.call('HDEL', key, 'base')
      elseif redis.call('HEXISTS', key, 'base') == 0 then
        redis.call('HSET', key, 'base', top)
      end
      redis.call('HSET', key, 'run', run)
    end

    """

    static let seqField = """
    local function seqfield(seq)
      if seq < 128 then return string.char(0x50, seq) end
      if seq < 16384 then return string.char(0x50, seq % 128 + 128, math.floor(seq / 128)) end
      local v = seq
      local tail = {string.char(0x50)}
      while v >= 128 do
        table.insert(tail, string.char(v % 128 + 128))
        v = math.floor(v / 128)
      end
      table.insert(tail, string.char(v))
      return table.concat(tail)
    end

    """

    /// At CONNECT, before the inbox is read: whether Redis lost numbers the client had seen
    /// (`lastSeq`, ARGV[1], is above the seq numbering restarted from). KEYS: seq, inbox,
    /// numbering record. Raises the seq to `lastSeq` when it is below; returns the entries
    /// stored since the restart, with their seqs, when some of them may carry numbers the
    /// client has seen, else {} (and forgets the restart: nothing collided). Records Redis'
    /// run id (ARGV[2]): numbering is now safe above `lastSeq`, so a later store on a node
    /// that has no session of this user must not take the user for one nobody has checked.
    static let numberingCheck = RedisScript("""
    local last = tonumber(ARGV[1])
    if tonumber(redis.call('GET', KEYS[1]) or '0') < last then redis.call('SET', KEYS[1], last) end
    redis.call('HSET', KEYS[3], 'run', ARGV[2])
    local base = redis.call('HGET', KEYS[3], 'base')
    if not base or last <= tonumber(base) then
      redis.call('HDEL', KEYS[3], 'base')
      return {}
    end
    return {base, redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. base, '+inf', 'WITHSCORES')}
    """)

    /// Moves the entries stored since Redis restarted past the client's `lastSeq`, keeping their
    /// order, so none of them is taken for one the client has already seen. KEYS: seq, inbox,
    /// numbering record, then per entry the ids its sender stored in this inbox. ARGV: the
    /// base `numberingCheck` saw, `lastSeq`, then per entry its seq and message id. Returns 0
    /// (and changes nothing) when the inbox changed since the check, else the number moved.
    static let renumber = RedisScript(seqField + """
    local base, last = ARGV[1], tonumber(ARGV[2])
    local n = (#ARGV - 2) / 2
    if redis.call('HGET', KEYS[3], 'base') ~= base or redis.call('ZCOUNT', KEYS[2], '(' .. base, '+inf') ~= n then
      return 0
    end
    -- All out first: a new seq may be the old seq of an entry not moved yet.
    local members = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. base, '+inf')
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. base, '+inf')
    for k = 1, n do
      local seq = last + k
      redis.call('ZADD', KEYS[2], seq, members[k] .. seqfield(seq))
      redis.call('ZADD', KEYS[3 + k], 'XX', seq, ARGV[2 + 2 * k])
    end
    if tonumber(redis.call('GET', KEYS[1]) or '0') < last + n then redis.call('SET', KEYS[1], last + n) end
    redis.call('HDEL', KEYS[3], 'base')
    return n
    """)

    /// Cumulative receipt of one device. KEYS: inbox, delivered mark (`acked`), seq, device
    /// marks (`cursors`), devices, held groups (a string of names, each followed by a space:
    /// read in the marks' MGET). ARGV: the device's new mark (clamped to the last assigned
    /// seq), 1 when the caller does not know every confirmed message's sender, the device, and
    /// how many confirmed entries may be kept for devices behind (the inbox limit). Raises the
    /// device mark and the user's delivered mark (the highest device mark: a message is
    /// delivered once its first device confirms it), and removes the entries every device has
    /// confirmed. A device further behind than the kept entries has its mark moved past those
    /// removed: it gets the newer ones, the older are in the history. A device not registered
    /// (revoked) changes nothing. Returns {entries, held}: when ARGV[2] is 1, the entries this
    /// receipt was the first to confirm (their senders are told), else {}; and when it raised
    /// the delivered mark, the groups whose copies are held (they go on from the group's log:
    /// `groupDeliver`).
    static let receipt = RedisScript("""
    local device = ARGV[3]
    local marks = redis.call('MGET', KEYS[3], KEYS[2], KEYS[6])
    local top, mark = tonumber(marks[1] or '0'), tonumber(marks[2] or '0')
    local upto = math.min(tonumber(ARGV[1]), top)
    -- Every device mark in one read: this device's, and the lowest, which bounds the removal.
    local cursors, at = redis.call('HGETALL', KEYS[4]), nil
    for i = 1, #cursors, 2 do
      if cursors[i] == device then at = i + 1 end
    end
    if not at and redis.call('HEXISTS', KEYS[5], device) == 0 then return {{}, {}} end
    if not at or upto > tonumber(cursors[at]) then
      redis.call('HSET', KEYS[4], device, upto)
      if at then cursors[at] = upto else table.insert(cursors, device); table.insert(cursors, upto) end
    end
    local items, held = {}, {}
    if upto > mark then
      if ARGV[2] == '1' then items = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. mark, upto) end
      redis.call('SET', KEYS[2], upto)
      mark = upto
      for name in string.gmatch(marks[3] or '', '(%S+) ') do table.insert(held, name) end
    end
    local low = mark
    for i = 2, #cursors, 2 do low = math.min(low, tonumber(cursors[i])) end
    if low < mark then
      local kept, retain = redis.call('ZCOUNT', KEYS[1], '-inf', mark), tonumber(ARGV[4])
      if kept > retain then
        local cut = redis.call('ZRANGE', KEYS[1], kept - retain - 1, kept - retain - 1, 'WITHSCORES')
        low = tonumber(cut[2])
        for i = 2, #cursors, 2 do
          if tonumber(cursors[i]) < low then redis.call('HSET', KEYS[4], cursors[i - 1], low) end
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', low)
    return {items, held}
    """)

    /// At CONNECT: registers the device, or finds it registered. KEYS: devices, device marks
    /// (`cursors`), delivered mark (`acked`), the device's revocation time, presence. ARGV:
    /// device, the most devices a user may have, now (ms), when the token was issued (ms). A
    /// new device starts at the user's delivered mark: it gets what no device has confirmed
    /// yet, not the past. Returns {1, device mark, devices, filtered, node...} (filtered: 1 when the user blocked someone or takes
    /// messages from contacts only, KEYS[6] and [7]; nodes: where the user's other devices
    /// are), {-1, 0, devices}
    /// when the user has the most devices already, {-2} when the token predates the device's
    /// revocation.
    static let registerDevice = RedisScript(presenceNodes + """
    local device = ARGV[1]
    local revoked = redis.call('GET', KEYS[4])
    if revoked and tonumber(ARGV[4]) <= tonumber(revoked) then return {-2} end
    local mark = redis.call('HGET', KEYS[2], device)
    local count = redis.call('HLEN', KEYS[1])
    if not mark then
      if redis.call('HEXISTS', KEYS[1], device) == 0 then
        if count >= tonumber(ARGV[2]) then return {-1, 0, count} end
        count = count + 1
      end
      mark = redis.call('GET', KEYS[3]) or '0'
      redis.call('HSET', KEYS[2], device, mark)
    end
    redis.call('HSET', KEYS[1], device, ARGV[3])
    local filtered = redis.call('EXISTS', KEYS[6]) == 1 or redis.call('HGET', KEYS[7], 'contacts-only') == 'on'
    local out = {1, tonumber(mark), count, filtered and 1 or 0}
    for _, node in ipairs(presencenodes(KEYS[5], '')) do table.insert(out, node) end
    return out
    """)

    /// Ends a device. KEYS: devices, cursors, presence, the device's revocation time, the
    /// earlier hash of every device's revocation (deleted: the per-device keys replace it).
    /// ARGV: device, now (ms), how long a revocation is kept (ms: the token lifetime, after
    /// which every token issued before it has expired). O(1) whatever the user revoked before.
    /// Returns false when the user has no such device, else the device's presence entry (''
    /// when it is not connected).
    /// KEYS 6-9, the key directory (docs/E2EE.md, Part 2): the user's device certificates,
    /// one-time KeyPackages, last-resort KeyPackages and revoked certificates. The device's
    /// packages go too, its certificate moves to the revoked ones, and a device that has only a
    /// certificate counts as one.
    static let revokeDevice = RedisScript(keepRevokedCertificate + """
    local device = ARGV[1]
    local certificate = redis.call('HGET', KEYS[6], device)
    local certified = redis.call('HDEL', KEYS[6], device)
    if certificate then keeprevoked(KEYS[9], device, certificate, ARGV[2]) end
    redis.call('ZREMRANGEBYLEX', KEYS[7], '[' .. device .. '\\0', '(' .. device .. '\\1')
    redis.call('HDEL', KEYS[8], device)
    if redis.call('HDEL', KEYS[1], device) == 0 and certified == 0 then return false end
    local presence = redis.call('HGET', KEYS[3], device) or ''
    redis.call('HDEL', KEYS[2], device)
    redis.call('HDEL', KEYS[3], device)
    redis.call('SET', KEYS[4], ARGV[2], 'PX', ARGV[3])
    redis.call('UNLINK', KEYS[5])
    return presence
    """)

    /// Writes one device's presence entry (`PresenceEntry`) and drops the entries no node has
    /// rewritten since ARGV[4] (ms): their nodes died. KEYS: presence. ARGV: device, entry,
    /// TTL (s), the oldest time a live entry can have. Returns 1 when no other device of the
    /// user was present (it comes online now), else 0.
    static let setPresence = RedisScript("""
    local entries = redis.call('HGETALL', KEYS[1])
    local oldest = tonumber(ARGV[4])
    local others = 0
    for i = 1, #entries, 2 do
      local seen = tonumber(string.match(entries[i + 1], ' (%d+)$') or '0')
      if seen < oldest then redis.call('HDEL', KEYS[1], entries[i])
      elseif entries[i] ~= ARGV[1] then others = others + 1 end
    end
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    redis.call('EXPIRE', KEYS[1], ARGV[3])
    if others == 0 then return 1 end
    return 0
    """)

    /// Rewrites a device's presence entry with a new time if it is still this session's, notes
    /// the device as seen, and forgets the user's devices seen last before ARGV[6] and not
    /// connected (their marks would hold back inbox entries and count against the limit for
    /// ever). KEYS: presence, devices, cursors. ARGV: device, its entry's `NODE SESSION `
    /// prefix, the new entry, TTL, now (ms), the oldest last-seen time kept (ms). Returns
    /// {renewed (0: the entry is gone, Redis lost it or it expired, and the caller writes it
    /// whole), how many devices the user has} (a count missed from another node's notice is
    /// learnt here).
    static let renewPresence = RedisScript("""
    local devices, count = redis.call('HGETALL', KEYS[2]), 0
    for i = 1, #devices, 2 do
      local name = devices[i]
      if name ~= ARGV[1] and tonumber(devices[i + 1]) < tonumber(ARGV[6]) and redis.call('HEXISTS', KEYS[1], name) == 0 then
        redis.call('HDEL', KEYS[2], name)
        redis.call('HDEL', KEYS[3], name)
      else
        count = count + 1
      end
    end
    if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[5]) end
    local entry = redis.call('HGET', KEYS[1], ARGV[1])
    if not entry or string.sub(entry, 1, #ARGV[2]) ~= ARGV[2] then return {0, count} end
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
    redis.call('EXPIRE', KEYS[1], ARGV[4])
    return {1, count}
    """)

    /// Lua: keeps a device certificate that stops being certified (revoked, or replaced under
    /// its name by another key) in the user's revoked certificates (`Keys.revokedCertificates`),
    /// scored by `now` (ms), the newest `revokedCertificatesKept` only: clients check the leaves
    /// of past commits with them (docs/E2EE.md, Part 2, "Revoked devices").
    static let keepRevokedCertificate = """
    local function keeprevoked(key, device, certificate, now)
      redis.call('ZADD', key, now, device .. '\\0' .. certificate)
      redis.call('ZREMRANGEBYRANK', key, 0, -\(revokedCertificatesKept + 1))
    end

    """
    /// The revoked certificates a user's key directory entry keeps.
    static let revokedCertificatesKept = 32

    /// Lua: the distinct nodes named in a presence hash's entries (`PresenceEntry`), other
    /// than `self`.
    static let presenceNodes = """
    local function presencenodes(key, self)
      local nodes, seen = {}, {}
      for _, entry in ipairs(redis.call('HVALS', key)) do
        local node = string.match(entry, '^(%S+) %d+ %S+ %d+$')
        if node and node ~= self and not seen[node] then
          seen[node] = true
          table.insert(nodes, node)
        end
      end
      return nodes
    end

    """

    /// The confirmed mark and the inbox entries above ARGV[1] up to ARGV[2], at most ARGV[3],
    /// read at one point of the replication stream: the HSET is a write (always propagated,
    /// even unchanged), so a WAIT after this call covers every entry it returned.
    /// KEYS: confirmed mark, inbox, numbering record. ARGV[4]: the lag up to which a replica
    /// counts as online. Returns {confirmed, entries, replicas online}.
    static let readReplicated = RedisScript(onlineReplicas + """
    redis.call('HSET', KEYS[3], 'read', 1)
    local confirmed = redis.call('GET', KEYS[1]) or '0'
    local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], ARGV[2], 'LIMIT', 0, ARGV[3])
    return {tonumber(confirmed), entries, onlinereplicas(tonumber(ARGV[4]))}
    """)

    /// Replaces a password hash made with older parameters, only while it is still the one
    /// checked. KEYS: the user. ARGV: the hash checked, new salt, new hash, its kdf. Returns 1
    /// replaced, 0 the hash changed meanwhile.
    static let replaceHash = RedisScript("""
    if redis.call('HGET', KEYS[1], 'hash') ~= ARGV[1] then return 0 end
    redis.call('HSET', KEYS[1], 'salt', ARGV[2], 'hash', ARGV[3], 'kdf', ARGV[4])
    return 1
    """)

    /// Creates an account only if the name is free. Returns 1 created, 0 taken.
    static let register = RedisScript("""
    if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
    redis.call('HSET', KEYS[1], 'salt', ARGV[1], 'hash', ARGV[2], 'kdf', ARGV[3])
    return 1
    """)

    /// Counts one event in the key's fixed window: the window (ARGV[1] ms) starts with the
    /// key's first count and is not extended by later ones, so a slow stream of events cannot
    /// keep a count alive. Returns {count, ms left in the window}.
    static let countInWindow = RedisScript("""
    local n = redis.call('INCR', KEYS[1])
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then
      redis.call('PEXPIRE', KEYS[1], ARGV[1])
      left = tonumber(ARGV[1])
    end
    return {n, left}
    """)

    /// Removes a device's presence entry only if it still names this session (a newer one may
    /// have replaced it), and notes when the device was last seen. KEYS: presence, devices.
    /// ARGV: device, session, now (ms).
    static let clearPresence = RedisScript("""
    local entry = redis.call('HGET', KEYS[1], ARGV[1])
    if entry and string.match(entry, '^%S+ (%d+) ') == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
    if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
    -- Devices still present: entries of dead nodes (not rewritten within the TTL) do not count.
    local live = 0
    for _, value in ipairs(redis.call('HVALS', KEYS[1])) do
      if tonumber(string.match(value, ' (%d+)$') or '0') >= tonumber(ARGV[4]) then live = live + 1 end
    end
    return live
    """)
}
