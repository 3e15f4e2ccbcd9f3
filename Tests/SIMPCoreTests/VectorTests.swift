import Crypto
import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport
import Testing

/// The test vectors of docs/vectors (docs/PROTOCOL.md, Test vectors): control frames, sealed
/// datagrams, bundles, early payloads and replay-window sequences. Each vector in the files is
/// checked against the real codecs (and every seal against swift-crypto's ChaCha20-Poly1305 as
/// well, built from the document's nonce and AAD rule), and the files must equal what the codecs
/// make now, so the document cannot drift from the code. `scripts/gen-vectors.sh` rewrites them
/// (SIMP_WRITE_VECTORS=1).
@Suite struct VectorTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/vectors").standardized

    // MARK: the vectors' shapes

    struct FrameVector: Codable, Equatable {
        var name: String
        /// The envelope in protobuf's JSON form, for reading.
        var envelope: String
        /// The whole frame: u32 BE length, then the serialized envelope.
        var frame: String
    }

    struct DatagramVector: Codable, Equatable {
        var name: String
        var kind: UInt8
        var direction: String
        var key: String
        var sessionId: String
        var packetNumber: String
        var nonce: String
        var header: String
        var plaintext: String
        /// The whole datagram: header, ciphertext, 16-byte tag.
        var datagram: String
    }

    struct BundleVector: Codable, Equatable {
        var name: String
        var messages: [String]
        var payload: String
    }

    struct EarlyVector: Codable, Equatable {
        var name: String
        var afterSeq: String
        var message: String
        var payload: String
    }

    struct ReplayVector: Codable, Equatable {
        var name: String
        var numbers: [String]
        var accepted: [Bool]
    }

    // MARK: what the codecs make

    static let key = SymmetricKey(data: (0..<32).map { UInt8($0) })

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    static func message(_ build: (inout Simp_Message) -> Void) -> Simp_Message {
        var message = Simp_Message()
        build(&message)
        return message
    }

    static var envelopes: [(String, Simp_Envelope)] {
        let text = message {
            $0.version = 1
            $0.messageID = "17"
            $0.time = 1_700_000_000_000
            $0.content = "hi bob"
            $0.toUser = "bob"
            $0.clientSeq = 1
            $0.fresh = true
        }
        return [
            ("register", Simp_Envelope(requestID: 1, .register(.with { $0.user = "alice"; $0.password = "correct horse" }))),
            ("ok", Simp_Envelope(requestID: 1, .ok(Simp_Ok()))),
            ("login", Simp_Envelope(requestID: 2, .login(.with { $0.user = "alice"; $0.password = "correct horse" }))),
            ("loginOk", Simp_Envelope(requestID: 2, .loginOk(.with { $0.token = "opaque-token"; $0.expiresAt = 1_700_086_400_000 }))),
            ("connect", Simp_Envelope(requestID: 3, .connect(.with {
                $0.token = "opaque-token"; $0.udpPort = 50_000; $0.lastSeq = 41; $0.bundles = true; $0.early = true; $0.device = "phone"
            }))),
            ("connected", Simp_Envelope(requestID: 3, .connected(.with {
                $0.sessionID = 0x0102_0304_0506_0708; $0.bindToken = Data(repeating: 0xab, count: 16); $0.confirmedSeq = 40
                $0.heartbeatMillis = 25_000; $0.user = "alice"; $0.udpPort = 7777; $0.sessionKey = Data((0..<32).map { UInt8($0) })
                $0.bundles = true; $0.early = true; $0.device = "phone"; $0.devices = 2
            }))),
            ("bound", Simp_Envelope(.bound(.with { $0.address = "192.0.2.1:50000" }))),
            ("ping", Simp_Envelope(requestID: 4, .ping(.with { $0.nonce = 99 }))),
            ("pong", Simp_Envelope(requestID: 4, .pong(.with { $0.nonce = 99 }))),
            ("accepted", Simp_Envelope(.accepted(.with { $0.messageID = "17"; $0.toUser = "bob"; $0.seq = 5 }))),
            ("accepted (group)", Simp_Envelope(.accepted(.with { $0.messageID = "18"; $0.toUser = "#team"; $0.seq = 9; $0.recipients = 4 }))),
            ("delivered", Simp_Envelope(.delivered(.with { $0.messageID = "17"; $0.toUser = "bob"; $0.seq = 5 }))),
            ("delivered (group member)", Simp_Envelope(.delivered(.with { $0.messageID = "18"; $0.toUser = "#team"; $0.seq = 9; $0.member = "carol" }))),
            ("failed", Simp_Envelope(.failed(Simp_Failed(messageID: "19", to: "nobody", code: .unknownUser, reason: "no such user: nobody")))),
            ("failed (e2e required)", Simp_Envelope(.failed(Simp_Failed(messageID: "22", to: "bob", code: .e2ERequired,
                                                                          reason: "this server takes only end-to-end encrypted messages to users")))),
            ("failed (group read from a non-member)", Simp_Envelope(.failed(Simp_Failed(messageID: "23", to: "alice", code: .notAMember,
                                                                                        reason: "you are not a member of #team: no read receipts in it")))),
            ("receipt", Simp_Envelope(requestID: 5, .receipt(.with { $0.upToSeq = 42; $0.missing = [44, 45] }))),
            ("receipt (holding)", Simp_Envelope(requestID: 5, .receipt(.with { $0.upToSeq = 42; $0.receivedUpToSeq = 47 }))),
            ("connect (holding)", Simp_Envelope(requestID: 3, .connect(.with {
                $0.token = "opaque-token"; $0.lastSeq = 42; $0.bundles = true; $0.device = "phone"; $0.receivedSeq = 47
            }))),
            ("missing", Simp_Envelope(.missing(.with { $0.clientSeqs = [3] }))),
            ("withdraw", Simp_Envelope(requestID: 6, .withdraw(.with { $0.messageID = "20"; $0.clientSeq = 7; $0.toUser = "bob" }))),
            ("query", Simp_Envelope(requestID: 7, .query(.with { $0.messages = [.with { $0.messageID = "17"; $0.toUser = "bob"; $0.seq = 5 }] }))),
            ("pathResponse", Simp_Envelope(requestID: 8, .pathResponse(.with { $0.token = Data(repeating: 0xcd, count: 16) }))),
            // The stream path: a BIND sealed under the `connected` vector's key, inside the connection.
            ("datagram (stream path)", Simp_Envelope(.datagram(Data(try! DatagramSeal.seal(
                DatagramHeader(kind: .bind, sessionID: 0x0102_0304_0506_0708, packetNumber: 1), payload: Array(repeating: 0xab, count: 16),
                key: SymmetricKey(data: (0..<32).map { UInt8($0) }), direction: .toServer, allocator: ByteBufferAllocator()).readableBytesView)))),
            ("bound (stream path)", Simp_Envelope(.bound(Simp_Bound()))),
            ("history", Simp_Envelope(requestID: 9, .history(.with { $0.peer = "bob"; $0.limit = 20; $0.before = 0 }))),
            ("historyResult", Simp_Envelope(requestID: 9, .historyResult(.with {
                $0.peer = "bob"; $0.messages = [text]; $0.more = true; $0.nextBefore = 20
            }))),
            ("retracted", Simp_Envelope(.retracted(.with { $0.fromUser = "alice"; $0.messageID = "21"; $0.code = .inboxFull; $0.reason = "bob's inbox is full" }))),
            ("devices", Simp_Envelope(requestID: 10, .devices(Simp_DevicesRequest()))),
            ("deviceList", Simp_Envelope(requestID: 10, .deviceList(.with {
                $0.devices = [.with { $0.name = "phone"; $0.online = true; $0.lastSeen = 1_700_000_000_000; $0.confirmedSeq = 42 }]
            }))),
            ("revokeDevice", Simp_Envelope(requestID: 11, .revokeDevice(.with { $0.name = "laptop" }))),
            ("groupRequest", Simp_Envelope(requestID: 12, .groupRequest(.with { $0.action = .create; $0.group = "team"; $0.users = ["bob", "carol"] }))),
            ("groupAnswer", Simp_Envelope(requestID: 12, .groupAnswer(.with {
                $0.group = "team"; $0.members = [.with { $0.name = "alice"; $0.role = "owner" }, .with { $0.name = "bob"; $0.role = "member" }]
                $0.groupSeq = 3
            }))),
            ("groupAnswer (invited)", Simp_Envelope(requestID: 14, .groupAnswer(.with {
                $0.group = "team"; $0.members = [.with { $0.name = "alice"; $0.role = "owner" }]; $0.invited = ["carol"]
            }))),
            ("groupRequest (accept)", Simp_Envelope(requestID: 15, .groupRequest(.with { $0.action = .accept; $0.group = "team" }))),
            ("groupAnswer (invitations)", Simp_Envelope(requestID: 16, .groupAnswer(.with {
                $0.groups = ["club"]; $0.invitations = [.with { $0.group = "team"; $0.by = "alice"; $0.expires = 1_700_604_800_000 }]
            }))),
            ("logout", Simp_Envelope(requestID: 13, .logout(Simp_Logout()))),
            ("submitCommit", Simp_Envelope(requestID: 17, .submitCommit(.with {
                // An MLSMessage PublicMessage commit framed on epoch 4 for the group 7e7e...7e, from leaf 0
                // (signature and tags made up: the server cannot check them), and its one Welcome, which
                // decodes and holds one EncryptedGroupSecrets per device, sent once for the two devices the
                // commit adds.
                $0.conversation = "#team"; $0.epoch = 4
                $0.commit = Data(MLSFraming.commit(group: [UInt8](repeating: 0x7e, count: 16), epoch: 4, fill: 0xc0))
                $0.welcome = Data(MLSFraming.welcome(secrets: 2, infoBytes: 16, fill: 0xbe))
                $0.added = [.with { $0.user = "carol"; $0.device = "phone" }, .with { $0.user = "carol"; $0.device = "laptop" }]
            }))),
            ("submitCommit (per-device Welcomes, the migration window)", Simp_Envelope(requestID: 17, .submitCommit(.with {
                // As older clients send it: the same Welcome once per device; taken as the one above.
                $0.conversation = "#team"; $0.epoch = 4
                $0.commit = Data(MLSFraming.commit(group: [UInt8](repeating: 0x7e, count: 16), epoch: 4, fill: 0xc0))
                $0.welcomes = ["phone", "laptop"].map { device in
                    .with { $0.user = "carol"; $0.device = device; $0.welcome = Data(MLSFraming.welcome(secrets: 2, infoBytes: 16, fill: 0xbe)) }
                }
            }))),
            ("commitStored", Simp_Envelope(requestID: 17, .commitStored(.with { $0.conversation = "#team"; $0.epoch = 5 }))),
            ("error (commit conflict)", Simp_Envelope(requestID: 18, .error(.with {
                $0.code = .commitConflict; $0.reason = "epoch 4 is committed already: #team is at epoch 5; fetch its commits and commit again on it"
            }))),
            ("error (invalid commit)", Simp_Envelope(requestID: 17, .error(.with {
                $0.code = .invalidCommit; $0.reason = "the commit is framed on epoch 3, not on epoch 4 it is submitted for"
            }))),
            ("fetchCommits (join)", Simp_Envelope(requestID: 19, .fetchCommits(.with { $0.conversation = "alice"; $0.fromEpoch = 0; $0.join = true }))),
            ("commitPage", Simp_Envelope(requestID: 19, .commitPage(.with {
                $0.conversation = "alice"; $0.epoch = 2
                $0.commits = [.with {
                    $0.epoch = 1; $0.commit = Data(MLSFraming.commit(group: [UInt8](repeating: 0x7e, count: 16), epoch: 1, fill: 0xde))
                    $0.fromUser = "alice"; $0.fromDevice = "laptop"
                    $0.serverTime = 1_700_000_000_789
                }]
                $0.welcome = .with {
                    $0.epoch = 1; $0.welcome = Data(MLSFraming.welcome(infoBytes: 16, fill: 0xbe)); $0.fromUser = "alice"; $0.fromDevice = "phone"
                    $0.serverTime = 1_700_000_000_456
                }
            }))),
            ("submitCommit (with its GroupInfo)", Simp_Envelope(requestID: 25, .submitCommit(.with {
                // A commit on epoch 4 and the GroupInfo of epoch 5 it leads to (RFC 9420 section
                // 12.4.3, framed by hand: tree hash, transcript hash, tag and signature made up).
                $0.conversation = "#team"; $0.epoch = 4
                $0.commit = Data(MLSFraming.commit(group: [UInt8](repeating: 0x7e, count: 16), epoch: 4, fill: 0xc0))
                $0.groupInfo = Data(MLSFraming.groupInfo(group: [UInt8](repeating: 0x7e, count: 16), epoch: 5, fill: 0xab))
            }))),
            ("fetchCommits (external)", Simp_Envelope(requestID: 26, .fetchCommits(.with { $0.conversation = "#team"; $0.external = true }))),
            ("commitPage (external)", Simp_Envelope(requestID: 26, .commitPage(.with {
                $0.conversation = "#team"; $0.epoch = 5
                $0.groupInfo = .with {
                    $0.epoch = 5; $0.groupInfo = Data(MLSFraming.groupInfo(group: [UInt8](repeating: 0x7e, count: 16), epoch: 5, fill: 0xab))
                    $0.fromUser = "alice"; $0.fromDevice = "phone"; $0.serverTime = 1_700_000_000_999
                }
            }))),
            ("submitCommit (external commit)", Simp_Envelope(requestID: 27, .submitCommit(.with {
                // A device rejoining on epoch 5: a new_member_commit with a path (section 12.4.3.2);
                // its leaf signed by a fixed key (seed all 0x11; Ed25519 signs deterministically, RFC 8032).
                $0.conversation = "#team"; $0.epoch = 5
                let signer = try! Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32))
                $0.commit = Data(MLSFraming.commit(group: [UInt8](repeating: 0x7e, count: 16), epoch: 5, fill: 0xc0,
                                                   path: .init(identity: Array("bob/phone".utf8), signer: signer), newMember: true))
            }))),
            ("linkStep (offer)", Simp_Envelope(requestID: 20, .linkStep(.with {
                $0.kind = .linkOffer; $0.device = "laptop"; $0.body = Data([0x01] + [UInt8](repeating: 0xab, count: 32) + [UInt8](repeating: 0xcd, count: 32))
            }))),
            ("linkFetch", Simp_Envelope(requestID: 21, .linkFetch(.with { $0.device = "laptop" }))),
            ("linkRecords", Simp_Envelope(requestID: 21, .linkRecords(.with {
                $0.links = [.with {
                    $0.device = "laptop"; $0.request = Data([0x01, 0x02]); $0.offeredBy = "phone"; $0.offer = Data([0x01, 0x03])
                    $0.expiresAt = 1_700_000_600_000
                }]
            }))),
            ("error (link step)", Simp_Envelope(requestID: 22, .error(.with {
                $0.code = .linkStep; $0.reason = "a reveal does not follow the last step of laptop's link (or the link was declined)"
            }))),
            ("error (markRead under e2e required)", Simp_Envelope(requestID: 23, .error(.with {
                $0.code = .e2ERequired
                $0.reason = "this server takes read receipts only end-to-end encrypted (--e2e required): send them sealed"
            }))),
            ("keyDirectoryEntry (revoked devices)", Simp_Envelope(requestID: 24, .keyDirectoryEntry(.with {
                $0.user = "alice"; $0.identityKey = Data(repeating: 0x1d, count: 32); $0.identitySince = 1_700_000_000_000
                $0.devices = [.with { $0.device = "phone"; $0.deviceKey = Data(repeating: 0xd1, count: 32); $0.signature = Data(repeating: 0x51, count: 64) }]
                $0.revokedDevices = [.with {
                    $0.device = "laptop"; $0.deviceKey = Data(repeating: 0xd2, count: 32); $0.signature = Data(repeating: 0x52, count: 64)
                }]
            }))),
            ("error", Simp_Envelope.error(.sessionReplaced, "a newer session of alice's device phone connected")),
        ]
    }

    static func frames() throws -> [FrameVector] {
        try envelopes.map { name, envelope in
            FrameVector(name: name, envelope: try envelope.jsonString(), frame: hex(Frame.encode(envelope).readableBytesView))
        }
    }

    static let sessionID: UInt64 = 0x0102_0304_0506_0708

    static func datagrams() throws -> [DatagramVector] {
        let text: [UInt8] = try message {
            $0.version = 1; $0.messageID = "17"; $0.content = "hi bob"; $0.toUser = "bob"; $0.clientSeq = 1; $0.fresh = true
        }.serializedBytes()
        let pushed: [UInt8] = try message {
            $0.version = 1; $0.messageID = "17"; $0.content = "hi bob"; $0.fromUser = "alice"; $0.toUser = "bob"; $0.seq = 5
            $0.serverTime = 1_700_000_000_123
        }.serializedBytes()
        let invitation: [UInt8] = try message {
            $0.version = 1; $0.messageID = "9001"; $0.type = .groupInvited; $0.content = "#team"; $0.fromUser = "alice"; $0.toUser = "carol"
            $0.seq = 3; $0.time = 1_700_000_000_456; $0.serverTime = 1_700_000_000_456
        }.serializedBytes()
        // The form the server checks (docs/PROTOCOL.md, Sealed messages): base64 of an MLSMessage
        // starting with mls10 and mls_private_message; the rest is opaque to it.
        let sealed: [UInt8] = try message {
            $0.version = 1; $0.messageID = "18"; $0.type = .sealed; $0.toUser = "bob"; $0.clientSeq = 2
            $0.content = Data(SealedText.privateMessagePrefix + Array(repeating: 0x5a, count: 20)).base64EncodedString()
        }.serializedBytes()
        // A read receipt sealed (docs/PROTOCOL.md, Read receipts; docs/E2EE.md, Part 7): what was
        // read is inside the MLS message; the server sees a SEALED_READ to the sender.
        let sealedRead: [UInt8] = try message {
            $0.version = 1; $0.messageID = "23"; $0.type = .sealedRead; $0.toUser = "alice"; $0.clientSeq = 3
            $0.content = Data(SealedText.privateMessagePrefix + Array(repeating: 0x5b, count: 20)).base64EncodedString()
        }.serializedBytes()
        // A group's read receipt sealed: to the sender of the messages read in the group,
        // `SENDER#NAME` (docs/PROTOCOL.md, Read receipts), sealed in the group's MLS group.
        let groupSealedRead: [UInt8] = try message {
            $0.version = 1; $0.messageID = "24"; $0.type = .sealedRead; $0.toUser = "alice#team"; $0.clientSeq = 4
            $0.content = Data(SealedText.privateMessagePrefix + Array(repeating: 0x5d, count: 20)).base64EncodedString()
        }.serializedBytes()
        // The notice stored when alice's key directory changed (docs/PROTOCOL.md, Keys, "Told of
        // a change"), pushed to bob's device when it is back.
        let keysChanged: [UInt8] = try message {
            $0.version = 1; $0.messageID = "9002"; $0.type = .keysChanged; $0.fromUser = "alice"; $0.toUser = "bob"
            $0.seq = 6; $0.time = 1_700_000_000_789; $0.serverTime = 1_700_000_000_789
        }.serializedBytes()
        // Sealed TYPING bodies: the routing name, a zero byte, the MLS message (relayed as it is).
        let mls = SealedText.privateMessagePrefix + Array(repeating: 0x5c, count: 20)
        let cases: [(String, DatagramKind, DatagramDirection, UInt64, [UInt8])] = [
            ("BIND", .bind, .toServer, 1, Array(repeating: 0xab, count: 16)),
            ("DATA to the server", .data, .toServer, 2, text),
            ("KEEPALIVE", .keepalive, .toServer, 3, []),
            ("PONG", .pong, .toClient, 1, []),
            ("DATA to the client", .data, .toClient, 2, pushed),
            ("CHALLENGE", .challenge, .toClient, 3, Array(repeating: 0xcd, count: 16)),
            ("BUNDLE to the client", .bundle, .toClient, 4, DatagramBundle.pack([pushed, pushed], spread: 1).first!.payload),
            ("EARLY", .early, .toClient, 5, EarlyPayload(afterSeq: 4, message: text).encoded()!),
            ("DATA to the client (a group invitation)", .data, .toClient, 6, invitation),
            ("DATA to the server (a sealed message)", .data, .toServer, 4, sealed),
            ("DATA to the server (a sealed read receipt)", .data, .toServer, 5, sealedRead),
            ("TYPING to the server", .typing, .toServer, 6, Array("bob".utf8)),
            ("TYPING to the client", .typing, .toClient, 7, Array("alice".utf8)),
            ("TYPING to the server (sealed)", .typing, .toServer, 7, SealedSignals.TypingBody(user: "bob", sealed: mls).bytes),
            ("TYPING to the client (sealed)", .typing, .toClient, 8, SealedSignals.TypingBody(user: "alice", sealed: mls).bytes),
            ("DATA to the server (a group's sealed read receipt)", .data, .toServer, 8, groupSealedRead),
            ("KEYS to the client", .keys, .toClient, 9, Array("alice".utf8)),
            ("DATA to the client (a KEYS_CHANGED notice)", .data, .toClient, 10, keysChanged),
        ]
        return try cases.map { name, kind, direction, number, plaintext in
            let header = DatagramHeader(kind: kind, sessionID: sessionID, packetNumber: number)
            let sealed = try DatagramSeal.seal(header, payload: plaintext, key: key, direction: direction)
            return DatagramVector(name: name, kind: kind.rawValue, direction: direction == .toServer ? "client to server" : "server to client",
                                  key: hex(key.withUnsafeBytes { Array($0) }), sessionId: String(sessionID), packetNumber: String(number),
                                  nonce: hex(nonce(direction, number)), header: hex(sealed.readableBytesView.prefix(DatagramHeader.size)),
                                  plaintext: hex(plaintext), datagram: hex(sealed.readableBytesView))
        }
    }

    /// The nonce as the document gives it: the direction (u32 BE), then the packet number (u64 BE).
    static func nonce(_ direction: DatagramDirection, _ number: UInt64) -> [UInt8] {
        withUnsafeBytes(of: direction.rawValue.bigEndian, Array.init) + withUnsafeBytes(of: number.bigEndian, Array.init)
    }

    static func bundles() -> [BundleVector] {
        let messages: [[UInt8]] = [[0x52, 0x02, 0x68, 0x69], [0x50, 0x01], Array(repeating: 0x22, count: 300)]
        return [BundleVector(name: "three messages", messages: messages.map { hex($0) }, payload: hex(DatagramBundle.pack(messages, spread: 1)[0].payload))]
    }

    /// A BUNDLE's payload as the document gives it: each message as a u16 BE length, then its bytes.
    static func bundle(_ messages: [[UInt8]]) -> [UInt8] {
        messages.flatMap { withUnsafeBytes(of: UInt16($0.count).bigEndian, Array.init) + $0 }
    }

    static func earlies() -> [EarlyVector] {
        let message: [UInt8] = [0x12, 0x02, 0x31, 0x37]
        return [EarlyVector(name: "after seq 4", afterSeq: "4", message: hex(message), payload: hex(EarlyPayload(afterSeq: 4, message: message).encoded()!))]
    }

    static func replays() -> [ReplayVector] {
        let sequences: [(String, [UInt64])] = [
            ("in order, then a repeat", [1, 2, 3, 2]),
            ("out of order within the window", [1, 5, 3, 4, 2, 5]),
            ("zero is never accepted", [0, 1]),
            ("far ahead, then too old", [1, 3000, 1016, 1017, 1015, 2999]),
        ]
        return sequences.map { name, numbers in
            var window = ReplayWindow()
            return ReplayVector(name: name, numbers: numbers.map(String.init), accepted: numbers.map { window.accept($0) })
        }
    }

    // MARK: the files

    static func file(_ name: String) -> URL { directory.appendingPathComponent(name) }

    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value) + Data("\n".utf8)
    }

    static func stored<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(contentsOf: file(name)))
    }

    static var writing: Bool { ProcessInfo.processInfo.environment["SIMP_WRITE_VECTORS"] == "1" }

    /// Writes the file when asked to; otherwise the file must hold exactly what the codecs make.
    func matches(_ name: String, _ made: some Codable & Equatable) throws {
        if Self.writing {
            try FileManager.default.createDirectory(at: Self.directory, withIntermediateDirectories: true)
            try Self.encode(made).write(to: Self.file(name))
        }
        let onFile = try Self.stored(name, as: type(of: made))
        #expect(onFile == made, "docs/vectors/\(name) differs from what the codecs make; run scripts/gen-vectors.sh if the change is meant")
    }

    // MARK: the checks

    @Test func theVectorFilesAreWhatTheCodecsMake() throws {
        try matches("frames.json", Self.frames())
        try matches("datagrams.json", Self.datagrams())
        try matches("bundles.json", Self.bundles())
        try matches("early.json", Self.earlies())
        try matches("replay.json", Self.replays())
    }

    @Test func everyFrameParsesToItsEnvelopeAndBack() throws {
        for vector in try Self.stored("frames.json", as: [FrameVector].self) {
            var parser = FrameParser()
            parser.append(contentsOf: Self.bytes(vector.frame))
            let envelope = try #require(try parser.next(), "\(vector.name)")
            #expect(try envelope == Simp_Envelope(jsonString: vector.envelope), "\(vector.name)")
            #expect(Self.hex(Frame.encode(envelope).readableBytesView) == vector.frame, "\(vector.name)")
            #expect(parser.bufferedBytes == 0)
        }
    }

    @Test func everyDatagramOpensAsTheDocumentSaysWithAnIndependentChaChaPoly() throws {
        for vector in try Self.stored("datagrams.json", as: [DatagramVector].self) {
            let datagram = Self.bytes(vector.datagram)
            let header = Array(datagram.prefix(DatagramHeader.size))
            let sealed = Array(datagram.dropFirst(DatagramHeader.size))
            #expect(Self.hex(header) == vector.header)
            // The header as section 2 lays it out.
            #expect(header[0] == 1 && header[1] == vector.kind && header[2] == 0 && header[3] == 0, "\(vector.name)")
            #expect(Self.hex(header[4..<12]) == String(format: "%016llx", UInt64(vector.sessionId)!))
            #expect(Self.hex(header[12..<20]) == String(format: "%016llx", UInt64(vector.packetNumber)!))
            // swift-crypto, from the document's rule alone: nonce = direction || packet number, AAD = header.
            let key = SymmetricKey(data: Self.bytes(vector.key))
            let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: Self.bytes(vector.nonce)),
                                               ciphertext: sealed.dropLast(DatagramSeal.tagSize), tag: sealed.suffix(DatagramSeal.tagSize))
            #expect(Self.hex(try ChaChaPoly.open(box, using: key, authenticating: header)) == vector.plaintext, "\(vector.name)")
            // And the codec SIMP runs.
            var buffer = ByteBuffer(bytes: datagram)
            let decoded = try Datagram.decodeHeader(&buffer)
            let direction: DatagramDirection = vector.direction == "client to server" ? .toServer : .toClient
            #expect(Self.hex(try DatagramSeal.open(decoded, sealed: buffer, key: key, direction: direction)) == vector.plaintext)
            #expect(throws: DatagramError.self) {
                try DatagramSeal.open(decoded, sealed: buffer, key: key, direction: direction == .toServer ? .toClient : .toServer)
            }
        }
    }

    @Test func bundlesAndEarlyPayloadsSplitAsTheDocumentSays() throws {
        for vector in try Self.stored("bundles.json", as: [BundleVector].self) {
            #expect(try DatagramBundle.split(Self.bytes(vector.payload)).map { Self.hex($0) } == vector.messages)
            #expect(Self.hex(Self.bundle(vector.messages.map(Self.bytes))) == vector.payload, "not laid out as section 2 says")
        }
        for vector in try Self.stored("early.json", as: [EarlyVector].self) {
            let payload = Self.bytes(vector.payload)
            let decoded = try EarlyPayload(decoding: payload)
            #expect(decoded.afterSeq == UInt64(vector.afterSeq)! && Self.hex(decoded.message) == vector.message)
            // Section 2: afterSeq as u64 BE, then the message.
            #expect(Self.hex(payload) == String(format: "%016llx", UInt64(vector.afterSeq)!) + vector.message)
        }
    }

    @Test func replayWindowSequencesGiveTheDocumentedAnswers() throws {
        for vector in try Self.stored("replay.json", as: [ReplayVector].self) {
            var window = ReplayWindow()
            #expect(vector.numbers.map { window.accept(UInt64($0)!) } == vector.accepted, "\(vector.name)")
        }
    }
}
