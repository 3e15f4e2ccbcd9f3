import NIOCore
import SIMPRedis

/// Device links in Redis (docs/E2EE.md, "Linking a device"; `LinkFlow`): one hash per user
/// (`Keys.links`), field "DEVICE\0PART" for each part of DEVICE's link: request, by (the device
/// that offered), offer, reveal, grant, declined, expires (ms). The hash expires with its
/// newest link; an older link in it is read as gone once its `expires` passed.
extension Scripts {
    /// One step of DEVICE's link. KEYS: the user's links. ARGV: kind (1 request, 2 offer,
    /// 3 reveal, 4 grant, 5 decline), device, sender, body, now (ms), how long a link is kept
    /// (ms). Returns 0, -1 (no link kept), -2 (not the step after the link's last, or declined),
    /// -3 (the sender is not the device that offered, nor the new device for a decline).
    /// Who may take a request, an offer and a reveal is checked before (`LinkFlow.request`).
    static let linkStep = RedisScript("""
    local d = ARGV[2] .. '\\0'
    local kind = tonumber(ARGV[1])
    local now = tonumber(ARGV[5])
    if kind == 1 then
      redis.call('HDEL', KEYS[1], d .. 'request', d .. 'by', d .. 'offer', d .. 'reveal', d .. 'grant', d .. 'declined', d .. 'expires')
      redis.call('HSET', KEYS[1], d .. 'request', ARGV[4], d .. 'expires', now + tonumber(ARGV[6]))
      if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
      return 0
    end
    if tonumber(redis.call('HGET', KEYS[1], d .. 'expires') or '0') <= now then return -1 end
    local by = redis.call('HGET', KEYS[1], d .. 'by')
    if kind == 5 then
      if ARGV[3] ~= ARGV[2] and by ~= ARGV[3] then return -3 end
      redis.call('HSET', KEYS[1], d .. 'declined', '1')
      return 0
    end
    if redis.call('HEXISTS', KEYS[1], d .. 'declined') == 1 then return -2 end
    local has = function(part) return redis.call('HEXISTS', KEYS[1], d .. part) == 1 end
    if kind == 2 then
      if by then return -2 end
      redis.call('HSET', KEYS[1], d .. 'by', ARGV[3], d .. 'offer', ARGV[4])
    elseif kind == 3 then
      if not by or has('reveal') then return -2 end
      redis.call('HSET', KEYS[1], d .. 'reveal', ARGV[4])
    elseif kind == 4 then
      if by ~= ARGV[3] then return -3 end
      if not has('reveal') or has('grant') then return -2 end
      redis.call('HSET', KEYS[1], d .. 'grant', ARGV[4])
    else
      return -2
    end
    return 0
    """)
}

extension MessageStore {
    func linkStep(user: String, device: String, kind: Int, sender: String, body: [UInt8], nowMillis: Int64, keptMillis: Int64,
                  on loop: any EventLoop) -> EventLoopFuture<LinkFlow.Stepped> {
        let command = RedisCommand.script(Scripts.linkStep, keys: [keys.links(user)], args: [kind, device, sender, body, nowMillis, keptMillis])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            switch try replies[0].checked().int {
            case 0: .done
            case -1: .noLink
            case -3: .notOfferer
            default: .outOfOrder
            }
        }
    }

    /// Every field of the user's links, values as bytes (the bodies are binary).
    func links(of user: String, on loop: any EventLoop) -> EventLoopFuture<[String: [UInt8]]> {
        redis.run([RedisCommand("HGETALL", [keys.links(user)])], on: loop).flatMapThrowing { replies in
            let flat = try replies[0].checked().array ?? []
            var fields: [String: [UInt8]] = [:]
            for index in stride(from: 0, to: flat.count - 1, by: 2) {
                if let name = flat[index].string, let value = flat[index + 1].bytes { fields[name] = value }
            }
            return fields
        }
    }
}
