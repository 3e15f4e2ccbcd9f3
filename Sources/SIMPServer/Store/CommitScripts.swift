import SIMPRedis

/// The commit order's scripts (docs/E2EE.md, Part 3; `CommitFlow`). Every key is one
/// conversation's (`Keys.commitEpoch`, `commits`, `welcomes`, `welcomeEpochs`, `commitGroup`,
/// `groupInfo`, and a group's members): one slot.
extension Scripts {
    /// Stores a commit if it was made on the conversation's current epoch, and its Welcome with
    /// it. KEYS: epoch, commits, Welcomes, a group's members (for a one-to-one conversation a
    /// key of its slot that is never written), the Welcomes' epochs, the conversation's MLS group
    /// id, its latest GroupInfo. ARGV: the submitting user, the commit's epoch, the
    /// `StoredCommit`, how many commits to keep, "1" for a group, how many devices' Welcomes to
    /// keep, the length of the `StoredCommit`'s part that names the commit (all but its server
    /// time, field 5, the last: tag 40), the MLS group id the commit is framed for, the
    /// `StoredGroupInfo` of the new epoch or '' (the one kept goes: it is of an older epoch, which
    /// no external commit can be made on any more), then, if the commit adds devices, the
    /// `StoredWelcome` and per device it adds the device's user and field (a Welcome with no
    /// device is not stored: nothing would name it, or ever drop it).
    ///
    /// The Welcomes hash holds each Welcome once, under the epoch it joins at (the new epoch,
    /// `now`), and for each device the epoch of its latest Welcome, under "USER/DEVICE" (always
    /// with a '/': never an epoch); the Welcomes' epochs (a sorted set) score each device's field
    /// by that epoch. The script takes the field and the score from `now` alike, as the ZCOUNT
    /// that finds a Welcome no device names counts devices by score under the Welcome's field.
    /// A device's value with a ':' is "EPOCH:" and its own `StoredWelcome`, as kept before one
    /// Welcome per commit: read as its Welcome until it goes, and never counted as an epoch (its
    /// ZCOUNT would fail the script after the commit is stored). A Welcome goes when no device
    /// names it any more (added again by a later commit, or dropped).
    ///
    /// The group id must be the conversation's recorded one; the commit on epoch 0 records it
    /// (over a key left from before, as a group deleted by a node that did not know the key
    /// leaves it), and so does the next commit of a conversation that has none recorded. The
    /// same commit from the same device stored on its epoch already is answered as stored again,
    /// storing nothing. An epoch that went back below a stored commit is set past the stored
    /// commits (and the submit answered as a conflict). Devices' Welcomes into an epoch whose
    /// commits are no longer kept are dropped, then the oldest past the most kept.
    /// Returns {0, the new epoch}, {-1, the current epoch} (another commit won this epoch, or the
    /// epoch is ahead), {-2} (the submitter is not a member), {-3} (no such group), {-4, USER} (an
    /// added device's user is not a member), {-5} (framed for another MLS group): only the first
    /// stores anything.
    static let submitCommit = RedisScript("""
    local group = ARGV[5] == '1'
    if group then
      if redis.call('EXISTS', KEYS[4]) == 0 then return {-3} end
      if not redis.call('HGET', KEYS[4], ARGV[1]) then return {-2} end
    end
    local current = tonumber(redis.call('GET', KEYS[1]) or '0')
    if redis.call('HEXISTS', KEYS[2], current) == 1 then
      -- The epoch went back (a failover or a restore lost its write but not the commit's): a
      -- stored commit is never overwritten; the epoch is set past the commits stored.
      while redis.call('HEXISTS', KEYS[2], current) == 1 do current = current + 1 end
      redis.call('SET', KEYS[1], current)
      return {-1, current}
    end
    if tonumber(ARGV[2]) ~= current then
      -- The same commit from the same device, stored on that epoch already (a retry after a
      -- lost answer or REPLICAS_UNAVAILABLE): stored, as the first time.
      local same = tonumber(ARGV[7])
      local kept = redis.call('HGET', KEYS[2], ARGV[2])
      if kept and string.sub(kept, 1, same) == string.sub(ARGV[3], 1, same)
          and (#kept == same or string.byte(kept, same + 1) == 40) then
        return {0, tonumber(ARGV[2]) + 1}
      end
      return {-1, current}
    end
    local recorded = current > 0 and redis.call('GET', KEYS[6])
    if recorded and recorded ~= ARGV[8] then return {-5} end
    if group then
      for i = 11, #ARGV, 2 do
        if not redis.call('HGET', KEYS[4], ARGV[i]) then return {-4, ARGV[i]} end
      end
    end
    local now = current + 1
    redis.call('HSET', KEYS[2], current, ARGV[3])
    redis.call('SET', KEYS[1], now)
    if not recorded then redis.call('SET', KEYS[6], ARGV[8]) end
    if ARGV[9] ~= '' then
      redis.call('HSET', KEYS[7], 'epoch', now, 'info', ARGV[9])
    else
      redis.call('DEL', KEYS[7])
    end
    local old = current - tonumber(ARGV[4])
    if old >= 0 then redis.call('HDEL', KEYS[2], old) end
    -- The Welcomes that devices whose entries change named: each goes below once no device names it.
    local unnamed = {}
    local function unname(fields)
      if #fields == 0 then return end
      for _, named in ipairs(redis.call('HMGET', KEYS[3], unpack(fields))) do
        -- A value kept before one Welcome per commit ("EPOCH:" and its own Welcome) names no
        -- shared one: its ZCOUNT below would fail ("min or max is not a float") after the
        -- commit and the epoch are written.
        if named and not string.find(named, ':', 1, true) then unnamed[named] = true end
      end
    end
    if #ARGV >= 12 then
      local fields = {}
      for i = 12, #ARGV, 2 do table.insert(fields, ARGV[i]) end
      unname(fields)
      redis.call('HSET', KEYS[3], now, ARGV[10])
      for _, field in ipairs(fields) do
        redis.call('HSET', KEYS[3], field, now)
        redis.call('ZADD', KEYS[5], now, field)
      end
    end
    local function drop(fields)
      if #fields > 0 then
        unname(fields)
        redis.call('HDEL', KEYS[3], unpack(fields))
        redis.call('ZREM', KEYS[5], unpack(fields))
      end
    end
    drop(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[4]) - 1))
    local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[6])
    if over > 0 then drop(redis.call('ZRANGE', KEYS[5], 0, over - 1)) end
    for epoch in pairs(unnamed) do
      if redis.call('ZCOUNT', KEYS[5], epoch, epoch) == 0 then redis.call('HDEL', KEYS[3], epoch) end
    end
    return {0, now}
    """)

    /// A page of a conversation's commits. KEYS: as in `submitCommit`. ARGV: the asking user, its
    /// device's Welcome field for a join (else ''), the epoch to start at, the most commits, the
    /// most bytes (at least one commit is given), "1" for a group, how many commits are kept (a
    /// start before them starts at the oldest kept), "1" for an external fetch. A page never
    /// skips a commit after its start: only a join that finds the device's Welcome starts at the
    /// Welcome's epoch, and an external fetch that finds a GroupInfo at its epoch (a device with
    /// no state has nothing before it to process). The device's field names its Welcome's epoch, under which the Welcome is
    /// kept once for every device it is for (or, kept before that, holds "EPOCH:" and its own).
    /// Returns {0, current epoch, the `StoredWelcome` or '', 1 if more follow, the
    /// `StoredGroupInfo` or '', commits...}, {-2}
    /// (not a member), {-3} (no such group). A group's former member whose device a Welcome
    /// still names (added, then removed before the device joined) gets that Welcome and no
    /// commit: it reads what was sent to it while a member, and nothing of the order after.
    static let fetchCommits = RedisScript("""
    local former = false
    if ARGV[6] == '1' then
      if redis.call('EXISTS', KEYS[4]) == 0 then return {-3} end
      if not redis.call('HGET', KEYS[4], ARGV[1]) then
        if ARGV[2] == '' or not redis.call('HGET', KEYS[3], ARGV[2]) then return {-2} end
        former = true
      end
    end
    local current = tonumber(redis.call('GET', KEYS[1]) or '0')
    local from = math.max(tonumber(ARGV[3]), current - tonumber(ARGV[7]))
    local budget = tonumber(ARGV[5])
    local given = ''
    local named = ARGV[2] ~= '' and redis.call('HGET', KEYS[3], ARGV[2])
    if named then
      local epoch, welcome
      local colon = string.find(named, ':', 1, true)
      if colon then
        epoch = tonumber(string.sub(named, 1, colon - 1))
        welcome = string.sub(named, colon + 1)
      else
        epoch = tonumber(named)
        welcome = redis.call('HGET', KEYS[3], named)
      end
      if epoch and welcome then
        from = math.max(epoch, current - tonumber(ARGV[7]))
        given = welcome
        budget = budget - #welcome
      end
    end
    local info = ''
    if ARGV[8] == '1' and not former then
      local kept = redis.call('HMGET', KEYS[7], 'epoch', 'info')
      local epoch = tonumber(kept[1])
      if epoch and kept[2] and epoch <= current then
        from = math.max(epoch, current - tonumber(ARGV[7]))
        info = kept[2]
        budget = budget - #info
      end
    end
    local out = {0, current, given, 0, info}
    if former then
      if given == '' then return {-2} end
      return out
    end
    local epoch = from
    while epoch < current do
      local commit = redis.call('HGET', KEYS[2], epoch)
      if commit then
        if #out - 5 >= tonumber(ARGV[4]) or (#out > 5 and #commit > budget) then
          out[4] = 1
          break
        end
        budget = budget - #commit
        table.insert(out, commit)
      else
        break
      end
      epoch = epoch + 1
    end
    return out
    """)
}
