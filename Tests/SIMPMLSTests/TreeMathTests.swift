import SIMPMLS
import Testing

/// RFC 9420 Appendix C by hand (MLSVectorTests: against tree-math.json).
@Suite struct TreeMathTests {
    func nodes(_ values: [UInt32]) -> [NodeIndex] { values.map(NodeIndex.init) }

    @Test func directPathsAndCopathsOfAnEightLeafTree() throws {
        let size = try #require(TreeSize(leafCount: 8))
        #expect(size.root == NodeIndex(7))
        #expect(TreeMath.directPath(LeafIndex(0), in: size) == nodes([1, 3, 7]))
        #expect(TreeMath.copath(LeafIndex(0), in: size) == nodes([2, 5, 11]))
        #expect(TreeMath.directPath(LeafIndex(5), in: size) == nodes([9, 11, 7]))
        #expect(TreeMath.copath(LeafIndex(5), in: size) == nodes([8, 13, 3]))
        #expect(TreeMath.directPath(NodeIndex(7), in: size) == [])
        #expect(TreeMath.copath(NodeIndex(7), in: size) == [])
        #expect(TreeMath.directPath(NodeIndex(15), in: size) == nil)
        #expect(TreeMath.directPath(LeafIndex(8), in: size) == nil)
    }

    @Test func aOneLeafTreeIsItsRoot() throws {
        let size = try #require(TreeSize(leafCount: 1))
        #expect(size.root == NodeIndex(0))
        #expect(TreeMath.parent(NodeIndex(0), in: size) == nil)
        #expect(TreeMath.directPath(LeafIndex(0), in: size) == [])
    }

    @Test func treeSizesArePowersOfTwoUpTo2To31() throws {
        #expect(TreeSize(leafCount: 0) == nil)
        #expect(TreeSize(leafCount: 3) == nil)
        #expect(TreeSize(leafCount: UInt32.max) == nil)
        let largest = try #require(TreeSize(leafCount: 1 << 31))
        #expect(largest.nodeCount == UInt32.max)
        #expect(largest.root == NodeIndex((1 << 31) - 1))
        let lastLeaf = NodeIndex(UInt32.max - 1)
        #expect(TreeMath.directPath(lastLeaf, in: largest)?.count == 31)
        #expect(TreeMath.parent(NodeIndex(UInt32.max), in: largest) == nil)
        #expect(TreeMath.left(NodeIndex(UInt32.max)) != nil)  // no trap at the top of the index range
        #expect(LeafIndex(UInt32.max).nodeIndex == nil)
    }

    @Test func leavesHaveNoChildren() {
        #expect(TreeMath.left(NodeIndex(4)) == nil)
        #expect(TreeMath.right(NodeIndex(4)) == nil)
        #expect(TreeMath.level(NodeIndex(4)) == 0)
        #expect(TreeMath.level(NodeIndex(7)) == 3)
    }
}
