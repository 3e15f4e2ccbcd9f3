#if os(Linux)
import Foundation
import Glibc

/// The kernel's word that the network changed: an address or a route came or went (rtnetlink(7),
/// the multicast groups below). `simp` rebinds its datagram socket on each, which on the stream
/// path probes UDP at once instead of at the back-off's next probe (issue 45, item 3;
/// `SIMPClient.rebindUDP`). A thread blocked in `recv` reads them: netlink is not a socket
/// SwiftNIO watches, and a change is rare. It lives as long as the process.
public enum NetworkChanges {
    // <linux/netlink.h> and <linux/rtnetlink.h>, which Glibc's module does not bring in.
    private static let netlinkRoute: Int32 = 0
    private static let ipv4Addresses: UInt32 = 0x10
    private static let ipv4Routes: UInt32 = 0x40
    private static let ipv6Addresses: UInt32 = 0x100
    private static let ipv6Routes: UInt32 = 0x400

    /// Calls `changed` once for each burst of notifications (a new address comes with its
    /// routes); false when no netlink socket can be opened (then nothing is watched).
    @discardableResult
    public static func watch(_ changed: @escaping @Sendable () -> Void) -> Bool {
        let socket = Glibc.socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkRoute)
        guard socket >= 0 else { return false }
        guard bind(socket, groups: ipv4Addresses | ipv4Routes | ipv6Addresses | ipv6Routes) else {
            close(socket)
            return false
        }
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 8192)
            while true {
                if recv(socket, &buffer, buffer.count, 0) < 0 {
                    if errno == EINTR { continue }
                    // ENOBUFS: more came than the socket held; a change all the same.
                    guard errno == ENOBUFS else { return }
                }
                // What else came with it is the same change.
                while recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
                changed()
            }
        }
        thread.name = "simp-network-changes"
        thread.start()
        return true
    }

    /// struct sockaddr_nl { sa_family_t nl_family; unsigned short nl_pad; __u32 nl_pid; __u32 nl_groups; }
    private static func bind(_ socket: Int32, groups: UInt32) -> Bool {
        var address = [UInt8](repeating: 0, count: 12)
        withUnsafeBytes(of: UInt16(AF_NETLINK)) { address.replaceSubrange(0..<2, with: $0) }
        withUnsafeBytes(of: groups) { address.replaceSubrange(8..<12, with: $0) }
        return address.withUnsafeBytes { raw in
            Glibc.bind(socket, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count)) == 0
        }
    }
}
#endif
