import Testing
@testable import SIMPRedis

/// What `--redis` and `--redis-cluster` make of the text they are given.
struct RedisDeploymentTests {
    @Test func oneAddressIsAskedUnlessTold() throws {
        #expect(try RedisDeployment(urls: "redis://h:7000/2", cluster: nil) == .detect(RedisConfiguration(host: "h", port: 7000, database: 2)))
        #expect(try RedisDeployment(urls: "redis://h:7000", cluster: false) == .single(RedisConfiguration(host: "h", port: 7000)))
        #expect(try RedisDeployment(urls: "redis://h:7000", cluster: true) == .cluster(seeds: [RedisConfiguration(host: "h", port: 7000)]))
    }

    @Test func severalAddressesAreACluster() throws {
        let seeds = [RedisConfiguration(host: "a", port: 7000), RedisConfiguration(host: "b", port: 7001), RedisConfiguration(host: "c", port: 6379)]
        #expect(try RedisDeployment(urls: "redis://a:7000,b:7001, redis://c", cluster: nil) == .cluster(seeds: seeds))
        #expect(try RedisDeployment(urls: "redis://a:7000,redis://b:7001,c", cluster: true) == .cluster(seeds: seeds))
    }

    @Test func whatIsRefused() {
        #expect(throws: RedisError.self) { try RedisDeployment(urls: "redis://a:7000,b:7001", cluster: false) }
        #expect(throws: RedisError.self) { try RedisDeployment(urls: "redis://a:7000/1,b:7001", cluster: nil) }
        #expect(throws: RedisError.self) { try RedisDeployment(urls: " , ", cluster: nil) }
        #expect(throws: RedisError.self) { try RedisDeployment(urls: "http://a:7000", cluster: nil) }
    }
}
