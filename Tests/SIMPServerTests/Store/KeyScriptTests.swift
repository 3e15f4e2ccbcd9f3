import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import Testing
@testable import SIMPServer

/// The key directory's scripts on a real Redis (`KeyScripts.swift`): what a store step does
/// when what it was checked against changed, the pool's bound, and a device's range apart
/// from another's whose name it starts with.
@Suite(.serialized) struct KeyScriptTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()
    let identity = [UInt8](repeating: 1, count: 32)
    let certificate = [UInt8](repeating: 2, count: 96)

    func setUp(_ redis: RedisServerProcess) async throws -> (RedisPool, MessageStore) {
        let pool = RedisPool(configuration: RedisConfiguration(port: redis.port))
        let messages = MessageStore(redis: pool, settings: StoreSettings())
        _ = try await messages.createAccount(user: "ann", salt: [1], hash: [2], kdf: "test", on: loop).get()
        #expect(try await messages.storeIdentity(user: "ann", key: identity, replace: false, nowMillis: 5, on: loop).get() == .done(pool: 0, lastResort: false))
        return (pool, messages)
    }

    @Test func aStepCheckedAgainstAnOldIdentityOrCertificateStoresNothing() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, store) = try await setUp(redis)
        let stale = [UInt8](repeating: 9, count: 32)
        #expect(try await store.storeCertificate(user: "ann", device: "phone", certificate: certificate, identity: stale, maxDevices: 10, nowMillis: 7,
                                                 on: loop).get() == .changed)
        #expect(try await store.storeCertificate(user: "ann", device: "phone", certificate: certificate, identity: identity, maxDevices: 10, nowMillis: 7,
                                                 on: loop).get() == .done(pool: 0, lastResort: false))
        let other = [UInt8](repeating: 3, count: 96)
        #expect(try await store.storeKeyPackages(user: "ann", device: "phone", certificate: other, packages: [[1]], lastResort: nil, maxPool: 100,
                                                 on: loop).get() == .changed)
        #expect(try await pool.run(RedisCommand("EXISTS", [store.keys.keyPackages("ann")])).int == 0)
        #expect(try await store.storeIdentity(user: "ann", key: stale, replace: false, nowMillis: 6, on: loop).get() == .identityExists)
        await pool.shutdown()
    }

    @Test func thePoolIsBoundedPerDeviceAndADevicesRangeIsItsOwn() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, store) = try await setUp(redis)
        for device in ["ph", "phone"] {
            _ = try await store.storeCertificate(user: "ann", device: device, certificate: certificate, identity: identity, maxDevices: 10, nowMillis: 7, on: loop).get()
        }
        #expect(try await store.storeKeyPackages(user: "ann", device: "phone", certificate: certificate, packages: [[1], [2], [3]], lastResort: nil,
                                                 maxPool: 3, on: loop).get() == .done(pool: 3, lastResort: false, addable: false),
                "one-time packages alone: told with the last-resort one")
        #expect(try await store.storeKeyPackages(user: "ann", device: "phone", certificate: certificate, packages: [[3], [4]], lastResort: nil,
                                                 maxPool: 3, on: loop).get() == .full(pool: 3), "one new package past the bound: nothing stored")
        #expect(try await store.storeKeyPackages(user: "ann", device: "phone", certificate: certificate, packages: [[3]], lastResort: [9],
                                                 maxPool: 3, on: loop).get() == .done(pool: 3, lastResort: true, addable: true),
                "a package stored already is no new one; the device's first last-resort package: its user's circle is told")
        #expect(try await store.storeKeyPackages(user: "ann", device: "phone", certificate: certificate, packages: [], lastResort: [8],
                                                 maxPool: 3, on: loop).get() == .done(pool: 3, lastResort: true, addable: false),
                "another last-resort package: told once per certificate")
        // "ph" is a prefix of "phone": its range holds none of phone's packages.
        let claimed = try await store.claimKeyPackages(of: "ann", except: "", claimer: "bob", perHour: 5, on: loop).get()
        #expect(claimed.map(\.device) == ["phone"] && claimed.map(\.bytes) == [[1]])
        #expect(try await store.storeCertificate(user: "ann", device: "tablet", certificate: certificate, identity: identity, maxDevices: 2, nowMillis: 7,
                                                 on: loop).get() == .tooManyDevices)
        // A new key for phone drops the packages the old one signed.
        let rekeyed = [UInt8](repeating: 4, count: 96)
        _ = try await store.storeCertificate(user: "ann", device: "phone", certificate: rekeyed, identity: identity, maxDevices: 10, nowMillis: 7, on: loop).get()
        #expect(try await store.claimKeyPackages(of: "ann", except: "", claimer: "bob", perHour: 5, on: loop).get().isEmpty)
        await pool.shutdown()
    }

    /// A certificate replaced under its name by another key, or revoked, moves to the revoked
    /// certificates the directory lists (oldest first, the newest 32 kept); the same key again
    /// moves nothing, a revoked one certified again leaves the list; a new identity ends them
    /// with the rest.
    @Test func aReplacedOrRevokedCertificateIsKeptAsRevokedUntilANewIdentity() async throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let (pool, store) = try await setUp(redis)
        let rekeyed = [UInt8](repeating: 4, count: 96)
        for stored in [certificate, certificate, rekeyed] {
            _ = try await store.storeCertificate(user: "ann", device: "phone", certificate: stored, identity: identity, maxDevices: 10,
                                                 nowMillis: 7, on: loop).get()
        }
        _ = try await store.storeCertificate(user: "ann", device: "laptop", certificate: certificate, identity: identity, maxDevices: 10,
                                             nowMillis: 8, on: loop).get()
        _ = try await store.revokeDevice(user: "ann", device: "laptop", nowMillis: 9, on: loop).get()
        var directory = try await store.keyDirectory(of: "ann", on: loop).get()
        #expect(directory.certificates == ["phone": rekeyed])
        #expect(directory.revokedCertificates.map(\.device) == ["phone", "laptop"])
        #expect(directory.revokedCertificates.map(\.certificate) == [certificate, certificate])

        // The first key certified again: current, and no longer listed as revoked (the second
        // moves there); a certificate holding zero bytes is kept whole.
        let zeros = [UInt8](repeating: 0, count: 40) + [UInt8](repeating: 6, count: 56)
        _ = try await store.storeCertificate(user: "ann", device: "phone", certificate: certificate, identity: identity, maxDevices: 10,
                                             nowMillis: 10, on: loop).get()
        _ = try await store.storeCertificate(user: "ann", device: "watch", certificate: zeros, identity: identity, maxDevices: 10,
                                             nowMillis: 11, on: loop).get()
        _ = try await store.revokeDevice(user: "ann", device: "watch", nowMillis: 12, on: loop).get()
        directory = try await store.keyDirectory(of: "ann", on: loop).get()
        #expect(directory.certificates == ["phone": certificate])
        #expect(directory.revokedCertificates.map(\.device) == ["laptop", "phone", "watch"])
        #expect(directory.revokedCertificates.map(\.certificate) == [certificate, rekeyed, zeros])

        for index in 0..<40 {
            let key = [UInt8](repeating: UInt8(10 + index), count: 96)
            _ = try await store.storeCertificate(user: "ann", device: "tablet", certificate: key, identity: identity, maxDevices: 10,
                                                 nowMillis: Int64(100 + index), on: loop).get()
        }
        directory = try await store.keyDirectory(of: "ann", on: loop).get()
        #expect(directory.revokedCertificates.count == Scripts.revokedCertificatesKept)
        #expect(directory.revokedCertificates.last?.certificate == [UInt8](repeating: 48, count: 96), "the newest kept, last")

        _ = try await store.storeIdentity(user: "ann", key: [UInt8](repeating: 5, count: 32), replace: true, nowMillis: 200, on: loop).get()
        directory = try await store.keyDirectory(of: "ann", on: loop).get()
        #expect(directory.certificates.isEmpty && directory.revokedCertificates.isEmpty)
        await pool.shutdown()
    }
}
