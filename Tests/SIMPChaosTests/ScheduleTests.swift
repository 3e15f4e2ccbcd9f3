import SIMPChaos
import Testing

@Suite struct ScheduleTests {
    @Test(arguments: Topology.allCases)
    func theSameSeedGivesTheSamePlan(topology: Topology) {
        let a = ChaosPlanner(seed: 42, duration: 90, topology: topology).plan()
        let b = ChaosPlanner(seed: 42, duration: 90, topology: topology).plan()
        #expect(a == b)
        #expect(!a.faults.isEmpty)
        #expect(!a.sends.isEmpty)
        let c = ChaosPlanner(seed: 43, duration: 90, topology: topology).plan()
        #expect(a.faults != c.faults)
    }

    @Test(arguments: Topology.allCases)
    func faultsComeOneAtATimeWithinTheRun(topology: Topology) {
        for seed in UInt64(0)..<200 {
            let plan = ChaosPlanner(seed: seed, duration: 60, topology: topology).plan()
            var free = 3.0
            for fault in plan.faults {
                #expect(fault.at >= free, "seed \(seed): \(fault) overlaps the one before")
                #expect(fault.kind.applies(to: topology), "seed \(seed): \(fault)")
                if let heal = fault.heal {
                    #expect(heal > fault.at && heal <= 60, "seed \(seed): \(fault)")
                    free = heal
                } else {
                    free = fault.at
                }
            }
            #expect(plan.lastHeal <= 60)
        }
    }

    @Test func onlyClientsWithADataDirectoryAreKilled() {
        for seed in UInt64(0)..<200 {
            let plan = ChaosPlanner(seed: seed, duration: 60, topology: .single).plan()
            #expect(!plan.dataDirClients.isEmpty)
            for fault in plan.faults where fault.kind == .clientKill {
                #expect(plan.dataDirClients.contains(fault.target), "seed \(seed): \(fault)")
            }
        }
    }

    @Test func aShardKilledForGoodIsLeftAlone() {
        for seed in UInt64(0)..<300 {
            let plan = ChaosPlanner(seed: seed, duration: 120, topology: .cluster).plan()
            var degraded = Set<Int>()
            for fault in plan.faults {
                switch fault.kind {
                case .redisKill, .redisKillNoRestart, .replicaLoss:
                    #expect(!degraded.contains(fault.target), "seed \(seed): \(fault) hits a shard already down a node")
                    #expect((0..<3).contains(fault.target))
                    if fault.kind == .redisKillNoRestart { degraded.insert(fault.target) }
                default: break
                }
            }
        }
    }

    @Test(arguments: Topology.allCases)
    func everyKindOccursOverSomeSeeds(topology: Topology) {
        var seen = Set<FaultKind>()
        for seed in UInt64(0)..<50 {
            seen.formUnion(ChaosPlanner(seed: seed, duration: 60, topology: topology).plan().faults.map(\.kind))
        }
        #expect(seen == Set(FaultKind.allCases.filter { $0.applies(to: topology) && $0.timed }))
    }

    @Test func someClientsLoseDatagramsAtTenToThirtyPercent() {
        for seed in UInt64(0)..<100 {
            let plan = ChaosPlanner(seed: seed, duration: 30, topology: .single).plan()
            #expect(!plan.datagramLoss.isEmpty)
            #expect(plan.datagramLoss.count < plan.users.count)
            #expect(plan.datagramLoss.allSatisfy { (0.1...0.3).contains($0.rate) && plan.users.indices.contains($0.client) })
            #expect(Set(plan.datagramLoss.map(\.client)).count == plan.datagramLoss.count)
        }
        var planner = ChaosPlanner(seed: 1, duration: 30, topology: .single)
        planner.kinds = [.nodeKill]
        #expect(planner.plan().datagramLoss.isEmpty)
        // Taking it out changes nothing else in the plan.
        var all = ChaosPlanner(seed: 1, duration: 30, topology: .single).plan()
        all.datagramLoss = []
        planner.kinds = FaultKind.allCases.filter { $0 != .datagramLoss }
        #expect(planner.plan() == all)
    }

    @Test(arguments: Topology.allCases)
    func udpIsBlockedForOneClientAtATimeForThreeToFifteenSeconds(topology: Topology) {
        #expect(FaultKind.udpBlocked.applies(to: topology))
        #expect(FaultKind.udpBlocked.timed)
        var planner = ChaosPlanner(seed: 0, duration: 60, topology: topology)
        planner.kinds = [.udpBlocked]
        var targets = Set<Int>()
        for seed in UInt64(0)..<100 {
            planner.seed = seed
            let plan = planner.plan()
            #expect(!plan.faults.isEmpty, "seed \(seed)")
            for fault in plan.faults {
                #expect(fault.kind == .udpBlocked)
                #expect(plan.users.indices.contains(fault.target), "seed \(seed): \(fault)")
                let down = (fault.heal ?? .infinity) - fault.at
                #expect(down >= 3 && down <= 15, "seed \(seed): \(fault)")
                targets.insert(fault.target)
            }
            // Every blocked client, and no other, goes through a relay (here none is lossy).
            #expect(plan.udpBlockedClients == Set(plan.faults.map(\.target)).sorted())
            #expect(plan.datagramLoss.isEmpty)
            #expect(plan.relayedClients == plan.udpBlockedClients)
        }
        // Any client may be the one.
        #expect(targets == Set(0..<8))
    }

    @Test(arguments: Topology.allCases)
    func udpBlockedComesInTheDefaultPlansAndTheSeedDecidesItAll(topology: Topology) {
        let plans = (UInt64(0)..<50).map { ChaosPlanner(seed: $0, duration: 60, topology: topology).plan() }
        let blocked = plans.filter { !$0.udpBlockedClients.isEmpty }
        #expect(blocked.count >= 10)
        for plan in blocked {
            #expect(ChaosPlanner(seed: plan.seed, duration: 60, topology: topology).plan() == plan)
            // A blocked client has its relay, as a lossy one does.
            #expect(Set(plan.relayedClients) == Set(plan.udpBlockedClients + plan.datagramLoss.map(\.client)))
        }
        // Different seeds, different blocks: when and for whom.
        let firsts = blocked.compactMap { $0.faults.first { $0.kind == .udpBlocked } }
        #expect(Set(firsts.map(\.at)).count > 1 && Set(firsts.map(\.target)).count > 1)
    }

    @Test func theKindsCanBeNarrowed() {
        var planner = ChaosPlanner(seed: 7, duration: 60, topology: .single)
        planner.kinds = [.nodePause]
        let plan = planner.plan()
        #expect(!plan.faults.isEmpty)
        #expect(plan.faults.allSatisfy { $0.kind == .nodePause && $0.target == 0 })
    }

    @Test func sendsGoBetweenTwoDifferentUsersInTimeOrder() {
        let plan = ChaosPlanner(seed: 3, duration: 30, topology: .single).plan()
        #expect(plan.sends.allSatisfy { $0.from != $0.to && plan.users.indices.contains($0.from) && plan.users.indices.contains($0.to) })
        #expect(plan.sends.map(\.at) == plan.sends.map(\.at).sorted())
        // About 10 a second.
        #expect((200...400).contains(plan.sends.count))
    }

    @Test func minReplicasIsChosenBySeedOnlyForACluster() {
        #expect(ChaosPlanner(seed: 1, duration: 10, topology: .single).plan().minReplicas == 0)
        let chosen = Set((UInt64(0)..<20).map { ChaosPlanner(seed: $0, duration: 10, topology: .cluster).plan().minReplicas })
        #expect(chosen == [0, 1])
        #expect(ChaosPlanner(seed: 1, duration: 10, topology: .cluster, minReplicas: 1).plan().minReplicas == 1)
    }
}
