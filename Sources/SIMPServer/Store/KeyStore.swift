import NIOCore
import SIMPCore
import SIMPRedis

/// The key directory in Redis (`KeyScripts.swift`, `KeyFlow`).
extension MessageStore {
    private func keyDirectoryKeys(_ user: String) -> [any RedisArgument] {
        [keys.identity(user), keys.deviceCertificates(user), keys.keyPackages(user), keys.lastResortKeyPackages(user)]
    }

    /// What `KeyFlow` reads of a user: whether the account exists, its identity, its certificates.
    func keyDirectory(of user: String, on loop: any EventLoop) -> EventLoopFuture<KeyFlow.Directory> {
        let reads = [RedisCommand("EXISTS", [keys.user(user)]), RedisCommand("HGETALL", [keys.identity(user)]),
                     RedisCommand("HGETALL", [keys.deviceCertificates(user)]), RedisCommand("ZRANGE", [keys.revokedCertificates(user), 0, -1])]
        return redis.run(reads, on: loop).flatMapThrowing { replies in
            guard replies.count == 4 else { throw RedisError(.protocolViolation, "key directory read returned \(replies.count) replies") }
            let identity = Self.binaryFields(try replies[1].checked())
            var directory = KeyFlow.Directory(userExists: try replies[0].checked().int == 1)
            directory.identity = identity["key"]
            directory.identitySince = identity["since"].flatMap { Int64(String(decoding: $0, as: UTF8.self)) } ?? 0
            directory.certificates = Self.binaryFields(try replies[2].checked())
            directory.revokedCertificates = (try replies[3].checked().array ?? []).compactMap { member in
                // "DEVICE\0" and the certificate's 96 bytes.
                guard let bytes = member.bytes, let split = bytes.firstIndex(of: 0) else { return nil }
                return (String(decoding: bytes[..<split], as: UTF8.self), Array(bytes[(split + 1)...]))
            }
            return directory
        }
    }

    func storeIdentity(user: String, key: [UInt8], replace: Bool, nowMillis: Int64, on loop: any EventLoop) -> EventLoopFuture<KeyFlow.Stored> {
        let command = RedisCommand.script(Scripts.publishIdentity, keys: keyDirectoryKeys(user) + [keys.revokedCertificates(user)],
                                          args: [key, replace ? "1" : "0", nowMillis])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            try replies[0].checked().int == -1 ? .identityExists : .done(pool: 0, lastResort: false)
        }
    }

    func storeCertificate(user: String, device: String, certificate: [UInt8], identity: [UInt8], maxDevices: Int, nowMillis: Int64,
                          on loop: any EventLoop) -> EventLoopFuture<KeyFlow.Stored> {
        let command = RedisCommand.script(Scripts.publishDevice, keys: keyDirectoryKeys(user) + [keys.revokedCertificates(user)],
                                          args: [device, certificate, identity, maxDevices, nowMillis])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            switch try replies[0].checked().int {
            case -1: .changed
            case -2: .tooManyDevices
            default: .done(pool: 0, lastResort: false)
            }
        }
    }

    func storeKeyPackages(user: String, device: String, certificate: [UInt8], packages: [[UInt8]], lastResort: [UInt8]?, maxPool: Int,
                          on loop: any EventLoop) -> EventLoopFuture<KeyFlow.Stored> {
        let args: [any RedisArgument] = [device, certificate, maxPool, lastResort ?? []] + packages
        let command = RedisCommand.script(Scripts.uploadKeyPackages, keys: Array(keyDirectoryKeys(user).dropFirst()), args: args)
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let parts = try replies[0].checked().array ?? []
            guard parts.count == 4, let status = parts[0].int, let pool = parts[1].int else {
                throw RedisError(.protocolViolation, "upload script returned \(parts.count) parts")
            }
            switch status {
            case -1: return .changed
            case -2: return .full(pool: Int(pool))
            default: return .done(pool: Int(pool), lastResort: parts[2].int == 1, addable: parts[3].int == 1)
            }
        }
    }

    func claimKeyPackages(of user: String, except device: String, claimer: String, perHour: Int,
                          on loop: any EventLoop) -> EventLoopFuture<[(device: String, bytes: [UInt8], lastResort: Bool)]> {
        let command = RedisCommand.script(Scripts.claimKeyPackages, keys: Array(keyDirectoryKeys(user).dropFirst()) + [keys.claims(of: user, by: claimer)],
                                          args: [device, perHour == .max ? -1 : perHour])
        return redis.run([command], on: loop).flatMapThrowing { replies in
            let flat = try replies[0].checked().array ?? []
            return stride(from: 0, to: flat.count - 2, by: 3).compactMap { index in
                guard let device = flat[index].string, let bytes = flat[index + 1].bytes else { return nil }
                return (device, bytes, flat[index + 2].int == 1)
            }
        }
    }

    /// Whether `claimer` may claim `user`'s KeyPackages (`KeyFlow.claimRights`): the user's
    /// blocks, contacts-only setting and contacts, and whether the two share a group (the
    /// claimer's groups are another slot's: read only when it matters).
    func claimRights(of user: String, claimer: String, on loop: any EventLoop) -> EventLoopFuture<KeyFlow.ClaimRights> {
        let reads = [RedisCommand("EXISTS", [keys.user(user)]), RedisCommand("SISMEMBER", [keys.blocked(user), claimer]),
                     RedisCommand("HGET", [keys.settings(user), "contacts-only"]), RedisCommand("HGET", [keys.contacts(user), claimer]),
                     RedisCommand("HKEYS", [keys.groups(user)])]
        let redis = self.redis
        let claimerGroups = keys.groups(claimer)
        return redis.run(reads, on: loop).flatMapThrowing { replies -> (KeyFlow.ClaimRights, Set<String>) in
            guard replies.count == 5 else { throw RedisError(.protocolViolation, "claim rights read returned \(replies.count) replies") }
            var rights = KeyFlow.ClaimRights()
            rights.userExists = try replies[0].checked().int == 1
            rights.blocked = try replies[1].checked().int == 1
            rights.contactsOnlyStranger = try replies[2].checked().string == "on" && (try replies[3].checked().string) != "contact"
            return (rights, Set((try replies[4].checked().array ?? []).compactMap(\.string)))
        }.flatMap { rights, theirGroups in
            guard rights.contactsOnlyStranger, !rights.blocked, !theirGroups.isEmpty else { return loop.makeSucceededFuture(rights) }
            return redis.run([RedisCommand("HKEYS", [claimerGroups])], on: loop).flatMapThrowing { replies in
                var shared = rights
                shared.shareAGroup = !theirGroups.isDisjoint(with: (try replies[0].checked().array ?? []).compactMap(\.string))
                return shared
            }
        }
    }

    /// A HGETALL reply's fields, values as bytes (keys and signatures are binary).
    private static func binaryFields(_ reply: RedisValue) -> [String: [UInt8]] {
        let flat = reply.array ?? []
        var fields: [String: [UInt8]] = [:]
        for index in stride(from: 0, to: flat.count - 1, by: 2) {
            if let name = flat[index].string, let value = flat[index + 1].bytes { fields[name] = value }
        }
        return fields
    }
}
