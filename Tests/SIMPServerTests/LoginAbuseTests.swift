import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPServer
import SIMPTestSupport
import Testing

/// Issue 9, findings 3, 5, 6 and 9 (registration): logins and registrations stay cheap to
/// refuse for attackers' guesses and available to the real user (docs/SECURITY.md).
@Suite(.serialized) struct LoginAbuseTests {
    /// Wrong passwords for alice spread over ten addresses make every *other* address wait,
    /// but she still logs in with her password from the address she logged in from before,
    /// and her client reconnects after a server restart with its token (the restarted server
    /// counts no password login at all).
    @Test func othersGuessesLockNeitherTheOwnersAddressNorHerSession() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let port = cluster.addresses
        let spread = LoginThrottle.freeAttemptsPerUser / LoginThrottle.freeAttempts
        for source in (10..<10 + spread).map({ "127.0.0.\($0)" }) {
            for _ in 1...LoginThrottle.freeAttempts {
                #expect(errorCode(try login(port, "alice", "guess", from: source)) == .invalidCredentials)
            }
        }
        let elsewhere = try login(port, "alice", "pw-alice", from: "127.0.0.3")
        #expect(errorCode(elsewhere) == .loginThrottled)
        #expect(reason(elsewhere) == "too many failed logins for alice; try again in 1 s")
        #expect(await cluster.nameLocked("alice"), "locked as her login starts, or it would prove nothing")
        guard case .loginOk? = try login(port, "alice", "pw-alice", from: "127.0.0.1")?.body else {
            Issue.record("alice was locked out at her own address by others' failures")
            return
        }

        try await cluster.restartServer()
        #expect(await aliceLog.wait { $0.all.filter { if case .connected = $0 { true } else { false } }.count == 2 })
        #expect(await cluster.server.sessionCount() == 1)
        #expect(cluster.metric("simp_logins_total") == 0, "the reconnect presented the token, not the password")
        await alice.close()
        await cluster.stop()
    }

    /// A name nobody registered is counted, throttled and answered exactly like a registered
    /// one with a wrong password, and pays for a hash like it, so the answers take about as
    /// long (the times are printed; the hashes are what is checked).
    @Test func unknownNamesAreAnsweredAndHashedLikeKnownOnes() async throws {
        let cluster = try await TestCluster.start { $0.scryptRounds = 16_384 }
        try await cluster.register("alice")
        let port = cluster.addresses
        let known = try RawPeer(tcpPort: port.tcpPort, udpPort: port.udpPort, source: "127.0.0.2")
        let unknown = try RawPeer(tcpPort: port.tcpPort, udpPort: port.udpPort, source: "127.0.0.2")
        // One name's attempts, then the other's: its sixth comes right after its fifth, within
        // the first lockout's second even on a loaded machine (interleaved, the other name's
        // hash ran between them and could outlast it).
        func attempts(_ peer: RawPeer, _ name: String) throws -> (answers: [Simp_Envelope?], times: [Duration]) {
            var answers: [Simp_Envelope?] = []
            var times: [Duration] = []
            for i in 1...LoginThrottle.freeAttempts + 1 {
                let (answer, time) = try timed { try peer.request(UInt64(i), .login(loginRequest(name, "guess"))) }
                answers.append(answer)
                if i <= LoginThrottle.freeAttempts { times.append(time) }
            }
            return (answers, times)
        }
        let (knownAnswers, knownTimes) = try attempts(known, "alice")
        let (unknownAnswers, unknownTimes) = try attempts(unknown, "nobody")
        for (index, (a, b)) in zip(knownAnswers, unknownAnswers).enumerated() {
            let expected: Simp_ErrorCode = index < LoginThrottle.freeAttempts ? .invalidCredentials : .loginThrottled
            #expect(errorCode(a) == expected && errorCode(b) == expected, "attempt \(index + 1)")
            #expect(reason(a)?.replacingOccurrences(of: "alice", with: "NAME") == reason(b)?.replacingOccurrences(of: "nobody", with: "NAME"))
        }
        print("login timing: known \(median(knownTimes)), unknown \(median(unknownTimes)) (median of \(knownTimes.count))")
        #expect(cluster.metric("simp_logins_failed_total") == Double(2 * LoginThrottle.freeAttempts))
        // Registering alice hashed once; each checked attempt, known name or not, once more
        // (a throttled one is refused before any hash).
        #expect(cluster.metric("simp_password_hashes_total") == Double(1 + 2 * LoginThrottle.freeAttempts))
        await cluster.stop()
    }

    /// One address trying many names is throttled for every name, except those it has logged
    /// in to before; other addresses are not affected.
    @Test func oneAddressTryingManyNamesWaitsForAllButItsOwn() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register("bob")
        let port = cluster.addresses
        guard case .loginOk? = try login(port, "bob", "pw-bob", from: "127.0.0.2")?.body else {
            Issue.record("bob could not log in")
            return
        }
        for i in 1...LoginThrottle.freeAttemptsPerSource {
            #expect(errorCode(try login(port, "user\(i)", "guess", from: "127.0.0.2")) == .invalidCredentials)
        }
        let sprayer = try login(port, "alice", "pw-alice", from: "127.0.0.2")
        #expect(errorCode(sprayer) == .loginThrottled)
        #expect(reason(sprayer) == "too many failed logins from this address; try again in 1 s")
        guard case .loginOk? = try login(port, "bob", "pw-bob", from: "127.0.0.2")?.body else {
            Issue.record("bob was throttled at an address he logs in from")
            return
        }
        guard case .loginOk? = try login(port, "alice", "pw-alice", from: "127.0.0.1")?.body else {
            Issue.record("another address was throttled")
            return
        }
        #expect(cluster.metric(#"simp_limit_exceeded_total{limit="failed_logins"}"#) == 1)
        await cluster.stop()
    }

    /// Three hundred logins for unknown names sent at once from one address, on 30 connections:
    /// each connection has at most 2 requests in progress, the hashing queue takes at most
    /// `hashingPerIP` jobs of the address and refuses the rest at once (counted), so alice's
    /// login from another address is answered before the flood's hashes are done, not after.
    @Test func aLoginFloodDoesNotDelayAnotherUsersLogin() async throws {
        // The flood's connections say nothing while their logins wait to be hashed (tens of
        // seconds on a loaded machine): a heartbeat longer than that, so none is closed as silent.
        let cluster = try await TestCluster.start(heartbeat: .seconds(300)) { $0.scryptRounds = 16_384 }
        try await cluster.register("alice")
        let port = cluster.addresses
        let floods = try (0..<30).map { _ in try RawPeer(tcpPort: port.tcpPort, udpPort: port.udpPort, source: "127.0.0.2") }
        let perConnection = 10
        let count = floods.count * perConnection
        for (c, flood) in floods.enumerated() {
            let frames = (1...perConnection).flatMap { i in
                flood.frame(Simp_Envelope(requestID: UInt64(i), .login(loginRequest("ghost\(c)x\(i)", "guess"))))
            }
            flood.writeRaw(frames)
        }
        // Alice logs in while the flood's hashing is queued: the address's share of the queue
        // is full once the first of its logins has been refused.
        #expect(await waitFor { cluster.metric(#"simp_limit_exceeded_total{limit="password_hashing"}"#) >= 1 })

        let (answer, elapsed) = try timed { try login(port, "alice", "pw-alice", from: "127.0.0.1") }
        // The flood's hashes done when alice was answered (a wrong name is hashed too).
        let hashedBefore = cluster.metric("simp_logins_failed_total")
        guard case .loginOk? = answer?.body else {
            Issue.record("alice's login failed during the flood: \(String(describing: answer))")
            return
        }
        var codes: [Simp_ErrorCode: Int] = [:]
        for flood in floods {
            var answered = 0
            while answered < perConnection, let envelope = try flood.read() {
                if envelope.requestID != 0, let code = errorCode(envelope) {
                    codes[code, default: 0] += 1
                    answered += 1
                }
            }
        }
        print("login flood: alice answered in \(elapsed); flood answers \(codes)")
        #expect(codes.values.reduce(0, +) == count, "every flood request answered")
        let refused = codes[.rateLimited, default: 0]
        #expect(hashedBefore < Double(count - refused), "alice was answered before the flood's hashes were all done")
        #expect(refused > 0, "more hashing than one address may have waiting was refused")
        #expect(cluster.metric(#"simp_limit_exceeded_total{limit="password_hashing"}"#) == Double(refused))
        #expect(codes[.invalidCredentials, default: 0] + codes[.loginThrottled, default: 0] + refused == count)
        await cluster.stop()
    }

    /// Over the per-address registration limit the server answers RATE_LIMITED (counted);
    /// another address still registers.
    @Test func registrationsOverThePerAddressLimitAreRefused() async throws {
        let cluster = try await TestCluster.start { $0.limits.registrationsPerIP = 3 }
        let port = cluster.addresses
        for i in 1...3 {
            #expect(try register(port, "new\(i)", from: "127.0.0.2")?.body == .ok(Simp_Ok()))
        }
        let refused = try register(port, "new4", from: "127.0.0.2")
        #expect(errorCode(refused) == .rateLimited)
        #expect(reason(refused)?.hasPrefix("more than 3 registrations from this address within an hour") == true)
        #expect(cluster.metric(#"simp_limit_exceeded_total{limit="registrations"}"#) == 1)
        #expect(try register(port, "new4", from: "127.0.0.1")?.body == .ok(Simp_Ok()))
        await cluster.stop()
    }
}

private func loginRequest(_ user: String, _ password: String) -> Simp_LoginRequest {
    var request = Simp_LoginRequest()
    request.user = user
    request.password = password
    return request
}

/// One login on a fresh control connection from `source` (a loopback address).
private func login(_ server: ServerAddresses, _ user: String, _ password: String, from source: String) throws -> Simp_Envelope? {
    let peer = try RawPeer(tcpPort: server.tcpPort, udpPort: server.udpPort, source: source)
    return try peer.request(1, .login(loginRequest(user, password)))
}

private func register(_ server: ServerAddresses, _ user: String, from source: String) throws -> Simp_Envelope? {
    var request = Simp_RegisterRequest()
    request.user = user
    request.password = "pw-\(user)"
    let peer = try RawPeer(tcpPort: server.tcpPort, udpPort: server.udpPort, source: source)
    return try peer.request(1, .register(request))
}

private func reason(_ envelope: Simp_Envelope?) -> String? {
    if case .error(let error)? = envelope?.body { return error.reason }
    return nil
}

private func timed<T>(_ body: () throws -> T) rethrows -> (T, Duration) {
    let start = ContinuousClock.now
    let result = try body()
    return (result, ContinuousClock.now - start)
}

private func median(_ times: [Duration]) -> Duration {
    let sorted = times.sorted()
    return sorted[sorted.count / 2]
}
