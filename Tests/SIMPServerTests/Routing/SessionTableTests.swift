import Testing
@testable import SIMPServer

@Suite struct SessionTableTests {
    final class Entry: TableEntry {
        let id: UInt64
        let user: String
        let device: String
        init(_ id: UInt64, _ user: String, _ device: String = "default") {
            self.id = id
            self.user = user
            self.device = device
        }
    }

    @Test func aNewerSessionReplacesTheOlderOneOfTheSameDevice() {
        var table = SessionTable<Entry>()
        let first = Entry(1, "bob")
        do {
            let got = table.insert(first)
            #expect(got == nil)
        }
        let second = Entry(2, "bob")
        do {
            let got = table.insert(second)
            #expect(got === first)
        }
        #expect(table.count == 1)
        #expect(table[1] == nil)
        #expect(table.session(of: "bob", device: "default") === second)
        #expect(!table.isCurrent(first) && table.isCurrent(second))
    }

    @Test func twoDevicesOfAUserNeverReplaceEachOther() {
        var table = SessionTable<Entry>()
        let phone = Entry(1, "bob", "phone")
        let laptop = Entry(2, "bob", "laptop")
        #expect(table.insert(phone) == nil)
        #expect(table.insert(laptop) == nil)
        #expect(table.count == 2)
        #expect(Set(table.sessions(of: "bob").map(\.id)) == [1, 2])
        #expect(table.session(of: "bob", device: "phone") === phone)
        table.remove(1)
        #expect(table.sessions(of: "bob").map(\.id) == [2])
        table.remove(2)
        #expect(table.sessions(of: "bob").isEmpty)
    }

    @Test func removingAReplacedSessionKeepsTheNewerOne() {
        var table = SessionTable<Entry>()
        _ = table.insert(Entry(1, "bob"))
        _ = table.insert(Entry(2, "bob"))
        do {
            let got = table.remove(1)
            #expect(got == nil)
        }
        #expect(table.session(of: "bob", device: "default")?.id == 2)
        let removed = table.remove(2)
        #expect(removed?.id == 2)
        #expect(table.sessions(of: "bob").isEmpty)
        #expect(table.count == 0)
    }
}
