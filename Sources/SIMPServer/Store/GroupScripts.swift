import SIMPRedis

/// The scripts of groups. A group's keys share its slot (`simp:{#NAME}:...`): its members, its
/// sequence and its log, the one order every member and device sees. What a member receives
/// is copied from the log into the member's inbox by a script in the member's slot
/// (`groupDeliver`), in the group's order, so devices, cursors, catch-up and receipts are the
/// inbox's own (docs/ARCHITECTURE.md, "Groups").
extension Scripts {
    /// Lua: a varint field after its tag bytes.
    static let varintField = """
    local function varintfield(tag, v)
      local out = {tag}
      while v >= 128 do
        table.insert(out, string.char(v % 128 + 128))
        v = math.floor(v / 128)
      end
      table.insert(out, string.char(v))
      return table.concat(out)
    end

    """

    /// Lua: `groupAppend(bytes)` numbers one entry in the group's order and logs it; `top` is
    /// the group's sequence, written by the caller at the end. `groupSeq` is field 16 (tag
    /// bytes 0x80 0x01).
    static let groupAppend = varintField + """
    local top = tonumber(redis.call('GET', KEYS[2]) or '0')
    local first = top
    local logged, made = {}, {}
    local function groupappend(bytes)
      top = top + 1
      local entry = bytes .. varintfield(string.char(0x80, 0x01), top)
      table.insert(logged, top)
      table.insert(logged, entry)
      made[top] = entry
      return top
    end
    local function groupflush(cap)
      if top == first then return end
      redis.call('SET', KEYS[2], top)
      redis.call('ZADD', KEYS[3], unpack(logged))
      if redis.call('ZCARD', KEYS[3]) > cap + math.floor(cap / 10) then
        redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -cap - 1)
      end
    end

    """

    /// Stores messages of members in one group's order. KEYS: members, seq, log, then per
    /// message the ids its sender stored in this group. ARGV: id TTL, log cap, ids kept per
    /// sender, then per message its sender, id and bytes (empty: answer only, never stored).
    /// Returns {answers, members} where an answer is {1, groupSeq} stored, {0, groupSeq, entry}
    /// stored before (with the entry, empty once the log no longer holds it, so its delivery
    /// can be made again; a sender removed since is answered so too), {-1} no such group, {-2}
    /// the sender is not a member, {-4} not stored before; members: the names after the batch.
    static let groupStore = RedisScript(groupAppend + """
    local ttl, cap, idcap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
    local out = {}
    local exists = redis.call('EXISTS', KEYS[1]) == 1
    local n = 0
    for i = 4, #ARGV, 3 do
      n = n + 1
      local from, id, bytes, ids = ARGV[i], ARGV[i + 1], ARGV[i + 2], KEYS[3 + n]
      local prior = redis.call('ZSCORE', ids, id)
      if prior then
        -- Numbered earlier in this call, its entry is not in the log yet.
        local entry = made[tonumber(prior)] or redis.call('ZRANGEBYSCORE', KEYS[3], prior, prior)[1] or ''
        out[n] = {0, tonumber(prior), entry}
      elseif not exists then
        out[n] = {-1}
      elseif redis.call('HEXISTS', KEYS[1], from) == 0 then
        out[n] = {-2}
      elseif bytes == '' then
        out[n] = {-4}
      else
        local seq = groupappend(bytes)
        if redis.call('ZADD', ids, seq, id) > 0 and redis.call('ZCARD', ids) > idcap + math.floor(idcap / 10) then
          redis.call('ZREMRANGEBYRANK', ids, 0, -idcap - 1)
        end
        -- Renewed with a 1/24 slack, not on every message, as the one-to-one store does.
        if redis.call('TTL', ids) < ttl then redis.call('EXPIRE', ids, ttl + math.floor(ttl / 24)) end
        out[n] = {1, seq}
      end
    end
    groupflush(cap)
    return {out, redis.call('HKEYS', KEYS[1])}
    """)

    /// Changes a group's members; each change is an entry of its order. KEYS: members, seq,
    /// log, removals (user: the place of their latest removal or leave), joins (user: the
    /// place of their latest add, where their history starts), invitations (user: "BY
    /// EXPIRES"), and the group's commit epoch, commits, Welcomes, their epochs, its MLS group id
    /// and its latest GroupInfo
    /// (docs/E2EE.md, Part 3: deleted with the group, so a group made again under the name starts
    /// at epoch 0, with the group id of its first commit).
    /// ARGV: action (create, add, remove, leave, admin, accept, decline), the user
    /// acting, the most members a group may have, the log cap, the invitation record ("BY
    /// EXPIRES"), now (ms), then per user named its name and the bytes of its change entry
    /// (create, add, accept: added; remove: removed; leave: left; admin, decline: none). In a
    /// create or add, a user with no bytes is invited, not added: recorded, to join with
    /// accept until the record lapses. Returns {code} refused (27 no such group, 28 not a
    /// member, 29 not an owner or admin, 30 exists, 31 full, 33 no invitation), else {0,
    /// changes, members, invited} where a change is {groupSeq, user, kind, after}: kind a or r
    /// (the entry adds or removes that user), and for an add the place of that user's latest
    /// removal (0: none), which their copies must have reached before the add may follow a gap
    /// (`groupDeliver`); members {name, role, ...} after; invited: the users invited now.
    static let groupChange = RedisScript(groupAppend + """
    local action, by, max, cap, invitation, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
    local exists = redis.call('EXISTS', KEYS[1]) == 1
    local role = redis.call('HGET', KEYS[1], by)
    local changes, invited = {}, {}
    local function change(user, bytes, kind)
      local seq = groupappend(bytes)
      local after = 0
      if kind == 'r' then
        redis.call('HSET', KEYS[4], user, seq)
      else
        after = tonumber(redis.call('HGET', KEYS[4], user) or '0')
        redis.call('HSET', KEYS[5], user, seq)
      end
      table.insert(changes, {seq, user, kind, after})
    end
    local function invite(user)
      if redis.call('HEXISTS', KEYS[1], user) == 0 then
        redis.call('HSET', KEYS[6], user, invitation)
        table.insert(invited, user)
      end
    end
    -- A pending invitation: its record, unless it lapsed (then it is dropped).
    local function pending(user)
      local record = redis.call('HGET', KEYS[6], user)
      if not record then return false end
      if tonumber(string.match(record, ' (%d+)$') or '0') <= now then
        redis.call('HDEL', KEYS[6], user)
        return false
      end
      return true
    end
    if action == 'create' then
      if exists then return {30} end
      local count = 0
      for i = 7, #ARGV, 2 do
        if ARGV[i + 1] ~= '' then count = count + 1 end
      end
      if count > max then return {31} end
      -- A name taken before holds no invitations of the group that had it.
      redis.call('DEL', KEYS[6])
      for i = 7, #ARGV, 2 do
        if ARGV[i + 1] == '' then
          invite(ARGV[i])
        elseif redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i] == by and 'owner' or 'member') == 1 then
          change(ARGV[i], ARGV[i + 1], 'a')
        end
      end
    elseif action == 'accept' or action == 'decline' then
      if not exists then return {27} end
      if role then return {0, {}, redis.call('HGETALL', KEYS[1]), {}} end
      if not pending(by) then return {33} end
      if action == 'accept' and redis.call('HLEN', KEYS[1]) >= max then return {31} end
      redis.call('HDEL', KEYS[6], by)
      if action == 'accept' then
        redis.call('HSETNX', KEYS[1], by, 'member')
        change(by, ARGV[8], 'a')
      end
    else
      if not exists then return {27} end
      if not role then return {28} end
      if action == 'leave' then
        redis.call('HDEL', KEYS[1], by)
        change(by, ARGV[8], 'r')
        if role == 'owner' then
          local rest, heir, admin = redis.call('HGETALL', KEYS[1]), nil, nil
          for i = 1, #rest, 2 do
            heir = heir or rest[i]
            if rest[i + 1] == 'admin' then admin = admin or rest[i] end
          end
          heir = admin or heir
          if heir then redis.call('HSET', KEYS[1], heir, 'owner') end
        end
        -- The last member gone, the group is gone; its sequence stays, so a group made again
        -- under the name never repeats a place in the order a device may have seen.
        if redis.call('EXISTS', KEYS[1]) == 0 then
          groupflush(cap)
          redis.call('DEL', KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12])
          return {0, changes, {}, {}}
        end
      elseif role == 'member' then
        return {29}
      elseif action == 'add' then
        local count = redis.call('HLEN', KEYS[1])
        for i = 7, #ARGV, 2 do
          if ARGV[i + 1] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then count = count + 1 end
        end
        if count > max then return {31} end
        for i = 7, #ARGV, 2 do
          if ARGV[i + 1] == '' then
            invite(ARGV[i])
          elseif redis.call('HSETNX', KEYS[1], ARGV[i], 'member') == 1 then
            redis.call('HDEL', KEYS[6], ARGV[i])
            change(ARGV[i], ARGV[i + 1], 'a')
          end
        end
      elseif action == 'remove' then
        for i = 7, #ARGV, 2 do
          local theirs = redis.call('HGET', KEYS[1], ARGV[i])
          if not theirs then return {28} end
          if theirs == 'owner' or (theirs == 'admin' and role ~= 'owner') then return {29} end
        end
        for i = 7, #ARGV, 2 do
          redis.call('HDEL', KEYS[1], ARGV[i])
          change(ARGV[i], ARGV[i + 1], 'r')
        end
      elseif action == 'admin' then
        if role ~= 'owner' then return {29} end
        for i = 7, #ARGV, 2 do
          if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then return {28} end
        end
        for i = 7, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], 'admin') end
      end
    end
    groupflush(cap)
    return {0, changes, redis.call('HGETALL', KEYS[1]), invited}
    """)

    /// Where a user named in a group create or add stands toward the user adding it
    /// (`GroupConsent`). KEYS: the user's account, blocked users, settings, contacts, groups.
    /// ARGV: the adder. Reads only. Returns {} when there is no such user, else {blocked (1:
    /// it blocked the adder), contacts-only (1: on), group-adds (its setting, '' for the
    /// default), contact (1: the adder is one), the groups it is in}.
    static let groupStanding = RedisScript("""
    if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
    local groups = 0
    for _, state in ipairs(redis.call('HVALS', KEYS[5])) do
      if string.sub(state, -2) == ' 1' then groups = groups + 1 end
    end
    local settings = redis.call('HMGET', KEYS[3], 'contacts-only', 'group-adds')
    return {redis.call('SISMEMBER', KEYS[2], ARGV[1]), settings[1] == 'on' and 1 or 0, settings[2] or '',
            redis.call('HGET', KEYS[4], ARGV[1]) == 'contact' and 1 or 0, groups}
    """)

    /// The invitations waiting for a user's answer, for listing (the group's record is what an
    /// accept checks). KEYS: invitations. ARGV: now (ms), then the step: `list`; `record GROUP
    /// VALUE CAP` (at most CAP kept: past it, lapsed ones go, then the soonest to lapse);
    /// `forget GROUP`. Lapsed ones are dropped. Returns the rest as field/value pairs.
    static let invitations = RedisScript("""
    local now, step = tonumber(ARGV[1]), ARGV[2]
    local function lapses(value) return tonumber(string.match(value, ' (%d+)$') or '0') end
    if step == 'record' then
      redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
    elseif step == 'forget' then
      redis.call('HDEL', KEYS[1], ARGV[3])
    end
    local all, out = redis.call('HGETALL', KEYS[1]), {}
    local soonest, at = nil, nil
    for i = 1, #all, 2 do
      if lapses(all[i + 1]) <= now then
        redis.call('HDEL', KEYS[1], all[i])
      else
        table.insert(out, all[i])
        table.insert(out, all[i + 1])
        if not at or lapses(all[i + 1]) < at then soonest, at = all[i], lapses(all[i + 1]) end
      end
    end
    if step == 'record' and #out / 2 > tonumber(ARGV[5]) then
      redis.call('HDEL', KEYS[1], soonest)
      for i = 1, #out, 2 do
        if out[i] == soonest then table.remove(out, i); table.remove(out, i); break end
      end
    end
    return out
    """)

    /// A page of the group's history for one member, from the entry that added them on (a
    /// member sees nothing from before they joined; a member added before joins were recorded
    /// sees it all). KEYS: members, log, joins. ARGV: the member, how many of the newest
    /// entries they may see to skip, how many to read. Returns {-1} for a non-member, else
    /// {count they may see, entries oldest first}.
    static let groupHistory = RedisScript("""
    if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-1} end
    local joined = redis.call('HGET', KEYS[3], ARGV[1]) or '0'
    local visible = redis.call('ZCOUNT', KEYS[2], joined, '+inf')
    local skip, read = tonumber(ARGV[2]), tonumber(ARGV[3])
    if skip >= visible or read <= 0 then return {visible, {}} end
    local oldest = math.min(skip + read, visible)
    return {visible, redis.call('ZRANGE', KEYS[2], -oldest, -(skip + 1))}
    """)

    /// Which read marks of one group name an entry of its order: the sender's id stored in the
    /// group at the place the mark says (the reader's slot checks that the group's copies to
    /// the reader reached it, `readMarks`). Reads only. KEYS: members, then the ids each sender
    /// stored in the group. ARGV: the reader, then per mark the index of its sender's key
    /// (from 2), its id and its place. Returns {0} when the reader is not a member, else {1,
    /// index...} (the marks that hold, from 1).
    static let groupReadMarks = RedisScript("""
    if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {0} end
    local out = {1}
    for i = 2, #ARGV, 3 do
      if tonumber(redis.call('ZSCORE', KEYS[tonumber(ARGV[i])], ARGV[i + 1]) or '-1') == tonumber(ARGV[i + 2]) then
        table.insert(out, (i + 1) / 3)
      end
    end
    return out
    """)

    /// Lua: the held-groups string (`Keys.heldGroups`) without the group `name`, written back
    /// (deleted when empty) only when it named it.
    static let unhold = """
    local function unhold(key, holds, name)
      local entry = name .. ' '
      -- Each name follows a space or the start.
      local at = string.find(' ' .. holds, ' ' .. entry, 1, true)
      if not at then return end
      local rest = string.sub(holds, 1, at - 1) .. string.sub(holds, at + #entry)
      if rest == '' then redis.call('DEL', key) else redis.call('SET', key, rest) end
    end

    """

    /// The member's copies of a group are no longer held. KEYS: held groups. ARGV: the group.
    static let releaseHeld = RedisScript(unhold + """
    unhold(KEYS[1], redis.call('GET', KEYS[1]) or '', ARGV[1])
    return 0
    """)

    /// Copies group entries into one member's inbox, in the group's order. KEYS: the member's
    /// user, seq, inbox, presence, groups (field GROUP, value "MARK IN": the last group seq
    /// copied, and 1 while a member), numbering record, blocked users, confirmed mark, group
    /// copies, held groups (a string, each name followed by a space), whether the member
    /// blocks anyone ("1", "0", absent: not known yet) and the seq from which copies are
    /// recorded (absent: not recorded). ARGV: the group, this node's id,
    /// the member's numbering floor (the highest seq a session of theirs on this node has
    /// seen, -1: no session here), Redis' run id (numbering as in `store`: never below the
    /// floor, and a restart nobody here has checked recorded as `base`), the group copies the
    /// member may have unconfirmed, then per entry its
    /// group seq, its kind for this member, its sender (a message's; '' for a change) and its
    /// bytes. A message from a sender the member blocked is passed over: the mark moves past
    /// it, nothing is copied (its seq is answered 0). The kind: `a AFTER` it adds them
    /// (while they are out, it may follow a gap once their copies reached AFTER, the place of
    /// their latest removal); `r` it removes them; `m` a message or someone else's change,
    /// copied only while they are in; any of them ending in `j` when it comes after a trimmed
    /// part of the log (it may follow a gap). An entry at or below the mark is skipped (copied before, by this node or
    /// another); any other that may not be copied stops the copy, so no member's inbox ever
    /// holds a group's entries out of order, nor one from while they were out. Returns {gap,
    /// mark, in, seqs, nodes}: gap 1 when it stopped (the caller reads the log after the mark
    /// and copies again), the mark and membership after, per entry the inbox seq it got (0:
    /// skipped or not reached), and where the member's devices are other than here when
    /// something was copied or found copied, and held: 1 when the member's unconfirmed group
    /// copies reached their bound, so the copy stopped there (the
    /// group is recorded held; the rest is copied from the log once the member confirms, as
    /// far as the log keeps it). Group copies never count against the one-to-one limits
    /// (`store`). {-1} when the member is no user.
    ///
    /// Each command costs Redis a few microseconds, per member and call: a member with room
    /// and no blocks runs no command beyond the copy's own (the marks, held groups, the
    /// blocking flag and where recording starts come in one MGET; the copies are recorded
    /// only while the inbox is deep, and counted only near the bound).
    static let groupDeliver = RedisScript(seqField + numberingRun + presenceNodes + unhold + """
    local marks = redis.call('MGET', KEYS[2], KEYS[8], KEYS[10], KEYS[11], KEYS[12])
    local top = tonumber(marks[1] or '0')
    -- Accounts are never deleted, so a user with a seq exists.
    if top == 0 and redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
    local confirmed, holds, blocking, since = tonumber(marks[2] or '0'), marks[3] or '', marks[4], tonumber(marks[5] or '')
    if not blocking then
      blocking = redis.call('SCARD', KEYS[7]) > 0 and '1' or '0'
      redis.call('SET', KEYS[11], blocking)
    end
    local blocks = blocking == '1'
    local state = redis.call('HGET', KEYS[5], ARGV[1]) or '0 0'
    local mark, member = string.match(state, '^(%d+) (%d)$')
    mark, member = tonumber(mark), tonumber(member)
    local first = top
    local floor = tonumber(ARGV[3])
    numberingrun(KEYS[6], floor, ARGV[4], top)
    if floor > top then top = floor end
    local inbox, seqs, gap, skipped, moved, held = {}, {}, 0, false, false, 0
    local limit, n = tonumber(ARGV[5]), (#ARGV - 5) / 4
    local depth = top - confirmed
    -- Copies are recorded only while the inbox is deep (above an eighth of the bound, at most
    -- 64 entries): a record costs Redis as much as the copy. Recording starts at `since` (the
    -- seq then), so the entries from the confirmed mark up to it are of unknown kind: the
    -- bound counts them as group copies, the one-to-one limits as one-to-one (`store`), either
    -- way at most that many too many.
    local deep = math.min(64, math.floor(limit / 8))
    if not since and depth + n > deep then
      since = top
      redis.call('SET', KEYS[12], since)
    elseif since and depth + n <= deep / 2 then
      since = nil
      redis.call('DEL', KEYS[12], KEYS[9])
    end
    -- The room for copies: the entries above the confirmed mark bound the group copies among
    -- them, so the copies are counted only when that bound does not fit this call.
    local room = limit - depth
    if room < n and since then
      local unknown = math.max(0, since - confirmed)
      room = limit - unknown - redis.call('ZCOUNT', KEYS[9], '(' .. math.max(confirmed, since), '+inf')
    end
    local copied = {}
    for i = 6, #ARGV, 4 do
      local seq, from, bytes = tonumber(ARGV[i]), ARGV[i + 2], ARGV[i + 3]
      local kind = string.sub(ARGV[i + 1], 1, 1)
      local copies = false
      if string.sub(ARGV[i + 1], -1) == 'j' then
        copies = true
      elseif kind == 'a' and member == 0 then
        copies = seq == mark + 1 or mark >= tonumber(string.match(ARGV[i + 1], '^a (%d+)$') or '0')
      elseif member == 1 then
        copies = seq == mark + 1
      end
      if gap == 1 or held == 1 then
        table.insert(seqs, 0)
      elseif seq <= mark then
        skipped = true
        table.insert(seqs, 0)
      elseif room <= 0 then
        -- Held before any gap is looked at: a gap would make the caller read the log for
        -- nothing, for every message, while the member is over its bound.
        held = 1
        table.insert(seqs, 0)
      elseif copies and kind == 'm' and blocks and from ~= '' and redis.call('SISMEMBER', KEYS[7], from) == 1 then
        mark = seq
        moved = true
        table.insert(seqs, 0)
      elseif copies then
        top = top + 1
        room = room - 1
        table.insert(inbox, top)
        table.insert(inbox, bytes .. seqfield(top))
        table.insert(copied, top)
        table.insert(copied, top)
        table.insert(seqs, top)
        mark = seq
        if kind == 'a' then member = 1 elseif kind == 'r' then member = 0 end
      else
        gap = 1
        table.insert(seqs, 0)
      end
    end
    local nodes = {}
    if #inbox > 0 then
      redis.call('SET', KEYS[2], top)
      redis.call('ZADD', KEYS[3], unpack(inbox))
      if since then
        redis.call('ZADD', KEYS[9], unpack(copied))
        -- The confirmed records are trimmed once per 64 seqs (not counted on every call).
        if math.floor(top / 64) > math.floor(first / 64) then
          redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', confirmed)
        end
      end
    end
    if #inbox > 0 or moved then redis.call('HSET', KEYS[5], ARGV[1], mark .. ' ' .. member) end
    -- A group is released once a copy of it found room (and no gap): room is a bound, so
    -- room found is room there.
    local listed = string.find(' ' .. holds, ' ' .. ARGV[1] .. ' ', 1, true) ~= nil
    if held == 1 and not listed then
      redis.call('SET', KEYS[10], holds .. ARGV[1] .. ' ')
    elseif held == 0 and gap == 0 and listed then
      unhold(KEYS[10], holds, ARGV[1])
    end
    -- An entry found copied already may have been copied by a node that died before it
    -- pushed it or told the member's nodes: they are named for it too.
    if #inbox > 0 or skipped then nodes = presencenodes(KEYS[4], ARGV[2]) end
    return {gap, mark, member, seqs, nodes, held}
    """)
}
