import SIMPRedis

extension Scripts {
    /// One step of a contact request on one user's records, in that user's slot: a request
    /// touches two users, so it is two steps, each atomic, made in an order that a crash
    /// between them leaves nothing a later step cannot finish (`ContactFlow`).
    /// KEYS: the user's account, contacts, blocked users, contact requests made in the current
    /// window, presence, whether the user blocks anyone (kept on block and unblock: "1" or "0",
    /// `Keys.blocking`). ARGV: the step, the other user, the window (s), requests per window.
    /// Steps and what they return first (then the contacts as field/value pairs, the users
    /// blocked, and the nodes where the user's devices are):
    /// - ask: the user asks PEER (counted against the rate first, whatever it comes to). -2 over
    ///   the rate, -1 the user blocked PEER, 1 PEER had asked the user (the request is an
    ///   acceptance), 2 contacts already, 3 asked before, 0 asked.
    /// - receive: PEER asks the user. -3 no such user, 0 the user blocked PEER (nothing is
    ///   recorded: the request is dropped unseen), 1 recorded as "received", 2 contacts
    ///   already, 3 the user had asked PEER (now contacts), 4 received before.
    /// - sent: records PEER as "sent" (unless contacts); 3 when PEER's own request came
    ///   meanwhile (both asked: now contacts), else 0.
    /// - contact: records PEER as a contact; -1 (nothing written) when the user blocked PEER.
    /// - accept, decline: PEER's request ("received"), -4 when there is none, 2 (accept) when
    ///   contacts already; 0.
    /// - remove: -4 when PEER is neither contact nor request; 0.
    /// - forget: PEER ended it from their side (declined, removed); 0.
    /// - block: the user's record of PEER goes (a contact ends, a request either way is
    ///   dropped): 1 when there was one (PEER's side is to forget it), else 0. unblock: -4 when
    ///   PEER was not blocked.
    /// - list: 0.
    static let contact = RedisScript(presenceNodes + """
    local step, peer = ARGV[1], ARGV[2]
    local state = redis.call('HGET', KEYS[2], peer)
    local status = 0
    if step == 'ask' then
      local made = redis.call('INCR', KEYS[4])
      if made == 1 then redis.call('EXPIRE', KEYS[4], ARGV[3]) end
      if made > tonumber(ARGV[4]) then status = -2
      elseif redis.call('SISMEMBER', KEYS[3], peer) == 1 then status = -1
      elseif state == 'contact' then status = 2
      elseif state == 'received' then status = 1
      elseif state == 'sent' then status = 3 end
    elseif step == 'receive' then
      if redis.call('EXISTS', KEYS[1]) == 0 then status = -3
      elseif redis.call('SISMEMBER', KEYS[3], peer) == 1 then status = 0
      elseif state == 'contact' then status = 2
      elseif state == 'sent' then
        redis.call('HSET', KEYS[2], peer, 'contact')
        status = 3
      elseif state == 'received' then status = 4
      else
        redis.call('HSET', KEYS[2], peer, 'received')
        status = 1
      end
    elseif step == 'sent' then
      if state == 'received' then
        redis.call('HSET', KEYS[2], peer, 'contact')
        status = 3
      elseif state ~= 'contact' then redis.call('HSET', KEYS[2], peer, 'sent') end
    elseif step == 'contact' then
      if redis.call('SISMEMBER', KEYS[3], peer) == 1 then status = -1
      else redis.call('HSET', KEYS[2], peer, 'contact') end
    elseif step == 'accept' and state == 'contact' then
      status = 2
    elseif step == 'accept' or step == 'decline' then
      if state ~= 'received' then status = -4
      elseif step == 'accept' then redis.call('HSET', KEYS[2], peer, 'contact')
      else redis.call('HDEL', KEYS[2], peer) end
    elseif step == 'remove' then
      if redis.call('HDEL', KEYS[2], peer) == 0 then status = -4 end
    elseif step == 'forget' then
      redis.call('HDEL', KEYS[2], peer)
    elseif step == 'block' then
      redis.call('SADD', KEYS[3], peer)
      redis.call('SET', KEYS[6], '1')
      status = redis.call('HDEL', KEYS[2], peer)
    elseif step == 'unblock' then
      if redis.call('SREM', KEYS[3], peer) == 0 then status = -4 end
      redis.call('SET', KEYS[6], redis.call('SCARD', KEYS[3]) > 0 and '1' or '0')
    end
    return {status, redis.call('HGETALL', KEYS[2]), redis.call('SMEMBERS', KEYS[3]), presencenodes(KEYS[5], '')}
    """)

    /// Which read marks name a message of the reader's inbox: the sender's id stored there at
    /// the seq the mark says, or for a group mark, an entry the group's copies to the reader
    /// reached (the mark in the reader's groups; the entry itself is checked in the group's
    /// slot, `groupReadMarks`). KEYS: the reader's settings, then the ids each sender stored in
    /// the reader's inbox, or the reader's groups. ARGV: per mark the index of its key (from 2),
    /// its id, its seq, its group ('' for one-to-one) and its place in the group's order.
    /// Returns {0} when the reader turned read receipts off, else {1, index...} (the marks that
    /// hold, from 1).
    static let readMarks = RedisScript("""
    if redis.call('HGET', KEYS[1], 'read-receipts') == 'off' then return {0} end
    local out = {1}
    for i = 1, #ARGV, 5 do
      local key, group = KEYS[tonumber(ARGV[i])], ARGV[i + 3]
      local holds
      if group == '' then
        holds = tonumber(redis.call('ZSCORE', key, ARGV[i + 1]) or '-1') == tonumber(ARGV[i + 2])
      else
        local mark = tonumber(string.match(redis.call('HGET', key, group) or '', '^(%d+) ') or '0')
        holds = mark >= tonumber(ARGV[i + 4])
      end
      if holds then table.insert(out, (i + 4) / 5) end
    end
    return out
    """)

    /// Where a user who takes ARGV[1]'s typing has its devices (every node, this one too), or
    /// nothing when it blocked ARGV[1] or takes contacts only and ARGV[1] is not one. Reads
    /// only. KEYS: the user's blocked users, settings, contacts, presence.
    static let typingNodes = RedisScript(presenceNodes + """
    if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return {} end
    if redis.call('HGET', KEYS[2], 'contacts-only') == 'on' and redis.call('HGET', KEYS[3], ARGV[1]) ~= 'contact' then return {} end
    return presencenodes(KEYS[4], '')
    """)

    /// Whether a sender takes a read receipt from ARGV[1]: it has read receipts on and did not
    /// block the reader. KEYS: the sender's settings, blocked users. Returns 1 or 0.
    static let takesReadReceipt = RedisScript("""
    if redis.call('HGET', KEYS[1], 'read-receipts') == 'off' or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
    return 1
    """)

    /// Who may see the user's presence: its contacts and the groups it is in (their members
    /// are read from each group's slot), less the users it blocked; nothing when it turned
    /// last-seen off (unless ARGV[1] is "any": the user asks whose presence it sees). KEYS:
    /// contacts, groups, blocked, settings, and the peers of its encrypted one-to-one
    /// conversations, read when ARGV[2] is "peers". Returns {contacts, groups, blocked} (and
    /// the peers), or {} when hidden.
    static let presenceCircle = RedisScript("""
    if ARGV[1] ~= 'any' and redis.call('HGET', KEYS[4], 'last-seen') == 'off' then return {} end
    local contacts, groups = {}, {}
    local records = redis.call('HGETALL', KEYS[1])
    for i = 1, #records, 2 do
      if records[i + 1] == 'contact' then table.insert(contacts, records[i]) end
    end
    local memberships = redis.call('HGETALL', KEYS[2])
    for i = 1, #memberships, 2 do
      if string.sub(memberships[i + 1], -2) == ' 1' then table.insert(groups, memberships[i]) end
    end
    if ARGV[2] == 'peers' then return {contacts, groups, redis.call('SMEMBERS', KEYS[3]), redis.call('SMEMBERS', KEYS[5])} end
    return {contacts, groups, redis.call('SMEMBERS', KEYS[3])}
    """)

    /// Remembers ARGV[1] among the peers of the user's encrypted one-to-one conversations
    /// (KEYS[1]); past ARGV[2] of them, one at random goes (a hint for key changes, not a record).
    static let rememberPeer = RedisScript("""
    if redis.call('SADD', KEYS[1], ARGV[1]) == 1 and redis.call('SCARD', KEYS[1]) > tonumber(ARGV[2]) then
      redis.call('SPOP', KEYS[1])
    end
    return 1
    """)

    /// Where a watcher's devices are, unless it blocked ARGV[1] (then nowhere: it is told nothing
    /// of ARGV[1]). KEYS: the watcher's presence, blocked users. Reads only.
    static let watcherNodes = RedisScript(presenceNodes + """
    if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {} end
    return presencenodes(KEYS[1], '')
    """)

    /// A user's presence as ARGV[1] may see it: {state, last seen}; state 2 hidden (last-seen
    /// off, or it blocked ARGV[1]), 1 online (an entry written since ARGV[2] ms), 0 offline.
    /// KEYS: settings, blocked, presence, devices. Reads only.
    static let presenceOf = RedisScript("""
    if redis.call('HGET', KEYS[1], 'last-seen') == 'off' or redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {2, 0} end
    local online = 0
    for _, entry in ipairs(redis.call('HVALS', KEYS[3])) do
      if tonumber(string.match(entry, ' (%d+)$') or '0') >= tonumber(ARGV[2]) then online = 1 end
    end
    local seen = 0
    for _, value in ipairs(redis.call('HVALS', KEYS[4])) do
      if tonumber(value) and tonumber(value) > seen then seen = tonumber(value) end
    end
    return {online, seen}
    """)

    /// Reads the user's settings, after changing those in ARGV (name, value pairs; value ''
    /// removes the setting: its default). KEYS: settings, presence. Returns {the settings as
    /// field/value pairs, the nodes where the user's devices are}.
    static let settings = RedisScript(presenceNodes + """
    for i = 1, #ARGV, 2 do
      if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
    end
    return {redis.call('HGETALL', KEYS[1]), presencenodes(KEYS[2], '')}
    """)
}
