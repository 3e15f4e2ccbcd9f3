/// What the router dropped or did, for logs and tests. Read on the router's loop.
struct RouterCounters: Sendable, Equatable {
    var datagramsIn = 0
    var malformedDatagrams = 0
    var unknownSession = 0
    var unvalidatedAddress = 0
    var badBindToken = 0
    var unsealable = 0
    var replayed = 0
    var stored = 0
    var duplicates = 0
    var pushes = 0
    var retransmits = 0
    var pushesGivenUp = 0
}
