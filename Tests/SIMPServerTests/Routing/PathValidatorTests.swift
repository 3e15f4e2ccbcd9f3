import NIOCore
import Testing
@testable import SIMPServer

@Suite struct PathValidatorTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let home = try! SocketAddress(ipAddress: "10.0.0.1", port: 4000)
    let elsewhere = try! SocketAddress(ipAddress: "10.0.0.2", port: 5000)
    let token: [UInt8] = Array(repeating: 7, count: 16)

    func bound() -> PathValidator {
        var path = PathValidator(bindToken: token)
        _ = path.bind(token: token, from: home)
        return path
    }

    @Test func theBindTokenBindsItsSourceOnce() {
        var path = PathValidator(bindToken: token)
        do {
            let got = path.check(home, size: 50, now: t0, newToken: { [1] })
            #expect(got == .drop(.unvalidatedAddress))
        }
        do {
            let got = path.bind(token: [0] + token.dropFirst(), from: home)
            #expect(got == .badToken)
        }
        do {
            let got = path.bind(token: token, from: home)
            #expect(got == .bound)
        }
        #expect(path.address == home)
        do {
            let got = path.bind(token: token, from: home)
            #expect(got == .answerAgain)
        }
        do {
            let got = path.bind(token: token, from: elsewhere)
            #expect(got == .ignored)
        }
        do {
            let got = path.check(home, size: 50, now: t0, newToken: { [1] })
            #expect(got == .accept)
        }
    }

    @Test func aNewSourceIsChallengedAtMostEvery200ms() {
        var path = bound()
        let challenge = PathValidator.Verdict.challenge(token: [9, 9], to: elsewhere)
        do {
            let got = path.check(elsewhere, size: 100, now: t0, newToken: { [9, 9] })
            #expect(got == challenge)
        }
        do {
            let got = path.check(elsewhere, size: 100, now: t0 + .milliseconds(199), newToken: { [8] })
            #expect(got == .drop(.unvalidatedAddress))
        }
        // The same address keeps its token; the old one is still the only address accepted.
        do {
            let got = path.check(elsewhere, size: 100, now: t0 + .milliseconds(200), newToken: { [8] })
            #expect(got == challenge)
        }
        do {
            let got = path.check(home, size: 100, now: t0 + .milliseconds(200), newToken: { [8] })
            #expect(got == .accept)
        }
    }

    @Test func challengesStayWithinThreeTimesTheBytesReceived() {
        var path = bound()
        // A challenge is header + 16-byte token + tag; 10 bytes received buy none of it.
        do {
            let got = path.check(elsewhere, size: 10, now: t0, newToken: { Array(repeating: 1, count: 16) })
            #expect(got == .drop(.amplification))
        }
        do {
            let got = path.check(elsewhere, size: 100, now: t0, newToken: { [2] })
            #expect(got != .drop(.amplification))
        }
    }

    @Test func onlyTheChallengeTokenMovesTheSession() {
        var path = bound()
        _ = path.check(elsewhere, size: 100, now: t0, newToken: { [5, 5, 5] })
        do {
            let got = path.respond(token: [5, 5, 4])
            #expect(got == nil)
        }
        #expect(path.address == home)
        do {
            let got = path.respond(token: [5, 5, 5])
            #expect(got == elsewhere)
        }
        do {
            let got = path.check(elsewhere, size: 10, now: t0, newToken: { [1] })
            #expect(got == .accept)
        }
        do {
            let got = path.check(home, size: 100, now: t0, newToken: { [6] })
            #expect(got == .challenge(token: [6], to: home))
        }
        // A token is good once.
        do {
            let got = path.respond(token: [5, 5, 5])
            #expect(got == nil)
        }
    }
}
