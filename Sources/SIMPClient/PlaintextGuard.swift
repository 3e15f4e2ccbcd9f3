#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SIMPCore

extension ServerAddress {
    /// Whether the host is this machine's loopback: "localhost", an IPv4 address in
    /// 127.0.0.0/8, or ::1 (also written as the IPv4-mapped ::ffff:127.x.y.z). Judged by the
    /// host as configured, never by what a name resolves to: any other name is not loopback,
    /// and neither is an address written any other way (127.1, 0.0.0.0, [::1] with brackets).
    public var isLoopback: Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        let mappedV4 = bytes[..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        return bytes == Array(repeating: 0, count: 15) + [1] || (mappedV4 && bytes[12] == 127)
    }
}

extension ClientConfiguration {
    /// The first server the password or a login token would cross a network to in clear: one
    /// that is not this machine, with neither `tls` nor `allowPlaintext`. nil: none.
    public var plaintextExposure: ServerAddress? {
        tls != nil || allowPlaintext ? nil : servers.first { !$0.isLoopback }
    }

    /// Why `connect` and `register` refuse this configuration before opening any connection;
    /// nil when they go ahead.
    var refusal: ClientError? {
        if let named = device, !DeviceName.isValid(named) {
            return ClientError("not a valid device name: \(named) (1-\(DeviceName.maxBytes) of a-z, 0-9, '.', '_' and '-', "
                               + "starting with a letter or digit)", code: .invalidName)
        }
        if endToEnd, dataDirectory == nil {
            return ClientError("end-to-end encryption needs a data directory (--data-dir): the keys are kept there", code: .endToEnd)
        }
        return plaintextExposure.map(ClientError.plaintext(to:))
    }
}

extension ClientError {
    /// The password or a token would go in clear to `server`, which is not this machine.
    static func plaintext(to server: ServerAddress) -> ClientError {
        ClientError("refusing to send the password or login token unencrypted to \(server), which is not this machine: "
                    + "configure TLS, or allow plaintext explicitly (ClientConfiguration.allowPlaintext)")
    }
}
