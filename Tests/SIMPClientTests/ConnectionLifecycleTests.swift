import Testing
@testable import SIMPClient

@Suite struct ConnectionLifecycleTests {
    func bound() -> ConnectionLifecycle {
        var life = ConnectionLifecycle()
        life.connectRequested()
        life.sessionOpened()
        life.pathBound()
        return life
    }

    @Test func aConnectIsConnectingUntilBound() {
        var life = ConnectionLifecycle()
        #expect(life.state == .idle)
        life.connectRequested()
        life.sessionOpened()
        #expect(life.state == .connecting && !life.isBound)
        do {
            let got = life.connectionLost()
            #expect(got == .nothing, "the connect call fails instead")
        }
        life.pathBound()
        #expect(life.state == .bound && life.isBound)
    }

    @Test func aReconnectGoesThroughBinding() {
        var life = bound()
        _ = life.connectionLost()
        let due = life.attemptDue()
        #expect(due && life.state == .waitingToReconnect)
        life.sessionOpened()
        #expect(life.state == .binding && !life.isBound)
        do {
            let got = life.connectionLost()
            #expect(got == .reconnect, "lost again before bound: wait and try again")
        }
        do {
            let got = life.scheduleAttempt()
            #expect(got)
        }
    }

    @Test func aLostConnectionIsResumedOneAttemptAtATime() {
        var life = bound()
        do {
            let got = life.connectionLost()
            #expect(got == .reconnect)
        }
        #expect(life.state == .waitingToReconnect)
        do {
            let got = life.scheduleAttempt()
            #expect(got)
        }
        do {
            let got = life.scheduleAttempt()
            #expect(!got, "one attempt scheduled at a time")
        }
        do {
            let got = life.connectionLost()
            #expect(got == .nothing, "a loss while waiting changes nothing")
        }
        do {
            let got = life.attemptDue()
            #expect(got)
        }
        do {
            let got = life.scheduleAttempt()
            #expect(got, "a failed attempt schedules the next")
        }
        do {
            let got = life.attemptDue()
            #expect(got)
        }
        life.sessionOpened()
        life.pathBound()
        #expect(life.state == .bound)
    }

    @Test func whatTheServerEndsIsNotResumed() {
        var life = bound()
        life.serverEnds(because: "an administrator closed this session")
        do {
            let got = life.connectionLost()
            #expect(got == .end(reason: "an administrator closed this session"))
        }
        #expect(life.state == .ended(reason: "an administrator closed this session"))
        do {
            let got = life.scheduleAttempt()
            #expect(!got)
        }
        do {
            let got = life.connectionLost()
            #expect(got == .nothing)
        }
        life.connectRequested()
        life.sessionOpened()
        life.pathBound()
        do {
            let got = life.connectionLost()
            #expect(got == .reconnect, "a new connect starts afresh")
        }
    }

    @Test func theApplicationsDisconnectStopsEverything() {
        var life = bound()
        do {
            let got = life.connectionLost()
            #expect(got == .reconnect)
        }
        do {
            let got = life.scheduleAttempt()
            #expect(got)
        }
        life.disconnectedByApplication()
        do {
            let got = life.attemptDue()
            #expect(!got, "an attempt scheduled before is not made")
        }
        do {
            let got = life.connectionLost()
            #expect(got == .nothing)
        }
    }

    @Test func aLossDuringTheApplicationsConnectIsThatConnectsFailure() {
        var life = ConnectionLifecycle()
        life.connectRequested()
        do {
            let got = life.connectionLost()
            #expect(got == .nothing)
        }
        life.connectFailed()
        #expect(life.state == .idle)
        do {
            let got = life.scheduleAttempt()
            #expect(!got)
        }
    }
}
