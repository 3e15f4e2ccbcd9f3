import NIOCore
@testable import SIMPClient
import SIMPCore
import Testing

/// The client's congestion window and pacing on its path to the server (`Uplink`).
@Suite struct UplinkTests {
    let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    /// A payload that fills a datagram: one message per datagram.
    let full = [UInt8](repeating: 7, count: DatagramHeader.maxPayload)

    func queued(_ count: Int, _ payload: [UInt8]) -> Uplink {
        var uplink = Uplink()
        for i in 0..<count { uplink.send("m\(i)", payload, now: t0, reason: .first) }
        return uplink
    }

    @Test func theFirstReleaseIsTheInitialWindowAndTheRestWaits() {
        var uplink = queued(15, full)
        #expect(uplink.release(now: t0, bundles: true).datagrams.count == 10)
        #expect(uplink.hasQueued)
        #expect(uplink.release(now: t0, bundles: true).datagrams.isEmpty, "the window is full")
        #expect(uplink.nextRelease(now: t0) == nil, "only an acknowledgement makes room")
    }

    @Test func anAcknowledgementMakesRoomForWhatWaits() {
        var uplink = queued(12, full)
        _ = uplink.release(now: t0, bundles: false)
        uplink.acknowledged("m0", now: t0 + .milliseconds(1))
        uplink.acknowledged("m1", now: t0 + .milliseconds(1))
        #expect(uplink.rtt.smoothedRTT == .milliseconds(1))
        let later = t0 + .milliseconds(2)
        #expect(uplink.release(now: later, bundles: false).datagrams.count == 2)
        #expect(!uplink.hasQueued)
    }

    @Test func smallMessagesShareDatagramsSpreadOverAtLeastFour() {
        var uplink = queued(20, [UInt8](repeating: 1, count: 100))
        let datagrams = uplink.release(now: t0, bundles: true).datagrams
        #expect(datagrams.count == 4)
        #expect(datagrams.allSatisfy { $0.kind == .bundle })
        let messages = datagrams.flatMap { (try? DatagramBundle.split($0.payload)) ?? [] }
        #expect(messages.count == 20)
    }

    @Test func withoutBundlesEachMessageIsADataDatagram() {
        var uplink = queued(3, [UInt8](repeating: 1, count: 100))
        let datagrams = uplink.release(now: t0, bundles: false).datagrams
        #expect(datagrams.map(\.kind) == [.data, .data, .data])
    }

    /// The server reported m3 missing: a congestion event, and m3 goes first, past the full window.
    @Test func aReportedLossGoesFirstPastAFullWindowAndHalvesIt() {
        var uplink = queued(14, full)
        _ = uplink.release(now: t0, bundles: false)
        let now = t0 + .milliseconds(1)
        uplink.send("m3", [3] + full.dropFirst(), now: now, reason: .reported)
        #expect(uplink.congestion.congestionEvents == 1)
        #expect(uplink.congestion.window == CongestionController.initialWindow / 2)
        let datagrams = uplink.release(now: now, bundles: false).datagrams
        #expect(datagrams.first?.payload.first == 3, "the lost one went first")
        #expect(datagrams.count == 1, "only the lost one passes the full window")
    }

    /// A resend on the retransmit timer is a loss, not a congestion event.
    @Test func aTimeoutLossDoesNotHalveTheWindow() {
        var uplink = queued(3, full)
        _ = uplink.release(now: t0, bundles: false)
        uplink.send("m1", full, now: t0 + .milliseconds(500), reason: .timeout)
        #expect(uplink.congestion.lost == 1)
        #expect(uplink.congestion.congestionEvents == 0)
        #expect(uplink.release(now: t0 + .milliseconds(500), bundles: false).datagrams.count == 1)
    }

    /// One that never left keeps its place when its timer fires, and is sent once.
    @Test func aTimeoutOfOneStillWaitingKeepsItsPlace() {
        var uplink = queued(12, full)
        _ = uplink.release(now: t0, bundles: false)
        uplink.send("m11", [11] + full.dropFirst(), now: t0 + .milliseconds(500), reason: .timeout)
        #expect(uplink.congestion.lost == 0)
        for i in 0..<10 { uplink.acknowledged("m\(i)", now: t0 + .milliseconds(1)) }
        let datagrams = uplink.release(now: t0 + .milliseconds(501), bundles: false).datagrams
        #expect(datagrams.count == 2)
        #expect(datagrams.last?.payload.first == 11, "m10 then m11, the latest copy")
    }

    /// An acknowledgement of a resent message gives no RTT sample: it may answer either copy.
    @Test func anAcknowledgementOfAResentMessageGivesNoRTTSample() {
        var uplink = queued(1, full)
        _ = uplink.release(now: t0, bundles: false)
        uplink.send("m0", full, now: t0 + .milliseconds(500), reason: .timeout)
        _ = uplink.release(now: t0 + .milliseconds(500), bundles: false)
        uplink.acknowledged("m0", now: t0 + .milliseconds(501))
        #expect(uplink.rtt.smoothedRTT == nil)
        #expect(uplink.congestion.bytesInFlight == 0)
    }

    /// Withdrawn or answered while still waiting: it never goes.
    @Test func aForgottenOrAnsweredMessageIsNotSent() {
        var uplink = queued(2, full)
        uplink.forget("m0")
        uplink.acknowledged("m1", now: t0)
        #expect(!uplink.hasQueued)
        #expect(uplink.release(now: t0, bundles: false).datagrams.isEmpty)
    }

    @Test func aNewPathStartsAfresh() {
        var uplink = queued(12, full)
        _ = uplink.release(now: t0, bundles: false)
        uplink.newPath()
        #expect(!uplink.hasQueued)
        #expect(uplink.congestion.bytesInFlight == 0)
    }
}
