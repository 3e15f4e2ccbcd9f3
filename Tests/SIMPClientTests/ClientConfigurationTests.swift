import SIMPClient
import Testing

@Suite struct ClientConfigurationTests {
    @Test func hostAndPortAreTheOneServer() {
        let config = ClientConfiguration(host: "10.0.0.1", port: 7000)
        #expect(config.servers == [ServerAddress(host: "10.0.0.1", port: 7000)])
        #expect(config.host == "10.0.0.1")
        #expect(config.port == 7000)
    }

    @Test func settingHostOrPortChangesOnlyTheFirstServer() {
        var config = ClientConfiguration(servers: [ServerAddress(host: "a", port: 1), ServerAddress(host: "b", port: 2)])
        config.host = "c"
        config.port = 3
        #expect(config.servers == [ServerAddress(host: "c", port: 3), ServerAddress(host: "b", port: 2)])
    }

    @Test func settingThePortOfAnEmptyListMakesOneServer() {
        var config = ClientConfiguration(servers: [])
        config.port = 9
        #expect(config.servers == [ServerAddress(host: "", port: 9)])
    }

    @Test func addressesPrintAsHostColonPort() {
        #expect("\(ServerAddress(host: "127.0.0.1", port: 7700))" == "127.0.0.1:7700")
        #expect("\(ServerAddress(host: "::1", port: 7700))" == "[::1]:7700")
    }
}
