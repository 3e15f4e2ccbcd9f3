/// Something the session table holds: found by its id (datagrams, control frames), by its
/// user (pushes, notices to senders) and by its user's device (answers to a sender).
protocol TableEntry: AnyObject {
    var id: UInt64 { get }
    var user: String { get }
    var device: String { get }
}

/// This node's sessions, by id, by user and by device; one session per device of a user (a
/// newer one of the same device replaces the older; other devices stay). Pure; confined to
/// the router's loop like the sessions themselves.
struct SessionTable<Entry: TableEntry> {
    private var byID: [UInt64: Entry] = [:]
    /// Per user, per device, its session's id.
    private var byUser: [String: [String: UInt64]] = [:]

    var count: Int { byID.count }
    /// Every session, in no particular order.
    var all: Dictionary<UInt64, Entry>.Values { byID.values }

    subscript(id: UInt64) -> Entry? { byID[id] }

    /// The user's sessions here, one per connected device, in no particular order. Lazy: the
    /// router asks for every message, and makes no array for it.
    func sessions(of user: String) -> LazyMapCollection<Dictionary<String, UInt64>.Values, Entry> {
        (byUser[user] ?? [:]).values.lazy.map { [byID] in byID[$0]! }
    }

    func session(of user: String, device: String) -> Entry? {
        byUser[user]?[device].flatMap { byID[$0] }
    }

    /// Adds a session; returns the older session of the same device, which is removed.
    mutating func insert(_ entry: Entry) -> Entry? {
        let older = session(of: entry.user, device: entry.device)
        if let older { byID[older.id] = nil }
        byID[entry.id] = entry
        byUser[entry.user, default: [:]][entry.device] = entry.id
        return older
    }

    /// Removes the session with this id; a newer session of the same device stays.
    @discardableResult
    mutating func remove(_ id: UInt64) -> Entry? {
        guard let entry = byID.removeValue(forKey: id) else { return nil }
        if byUser[entry.user]?[entry.device] == id {
            byUser[entry.user]![entry.device] = nil
            if byUser[entry.user]!.isEmpty { byUser[entry.user] = nil }
        }
        return entry
    }

    /// True while this exact session is still in the table (a reply that arrives after the
    /// session closed, or was replaced, is dropped).
    func isCurrent(_ entry: Entry) -> Bool {
        byID[entry.id] === entry
    }

}
