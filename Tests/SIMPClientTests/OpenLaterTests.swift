import Testing
@testable import SIMPClient

/// Which failures to open a sealed message leave it to be pushed again (`ConversationKeys.openLater`)
/// and which make it undecryptable for good. simp-chaos (seed 2929851673) saw a Redis kill
/// while a device fetched a conversation's commits turn a message undecryptable.
@Suite struct OpenLaterTests {
    @Test func aFailureToAskIsTriedAgain() {
        #expect(ConversationKeys.openLater(ClientError("message store unavailable: connection refused", code: .storeUnavailable)))
        #expect(ConversationKeys.openLater(ClientError("not connected", code: .notConnected)))
        #expect(ConversationKeys.openLater(ClientError("control connection to 127.0.0.1:7700 closed")))
        #expect(ConversationKeys.openLater(ClientError("no answer from the server within 10s")))
        #expect(ConversationKeys.openLater(ClientError("not stored: 0 of 1 replicas", code: .replicasUnavailable)))
    }

    @Test func anAnswerIsFinal() {
        #expect(!ConversationKeys.openLater(ClientError("end-to-end encryption failed: notInConversation", code: .endToEnd)))
        #expect(!ConversationKeys.openLater(ClientError("bob's identity changed", code: .identityChanged)))
        #expect(!ConversationKeys.openLater(ClientError("no such group", code: .noSuchGroup)))
        #expect(!ConversationKeys.openLater(ClientError("not a member", code: .notAMember)))
        #expect(!ConversationKeys.openLater(.cancelled))
    }
}

/// A failure to open keeps its cause when it passes through a `ClientError` (`ConversationKeys.clientError`):
/// a device never added to a group counts `notInConversation`, one after a refused commit `commitRefused`.
@Suite struct DecryptionCauseTests {
    @Test func aWrappedFailureKeepsItsCause() {
        typealias K = ConversationKeys
        #expect(K.cause(K.clientError(K.OpenFailure.notInConversation)) == .notInConversation)
        #expect(K.cause(K.clientError(K.OpenFailure.commitRefused("wrongEpoch(expected: 2, got: 1)"))) == .commitRefused)
        #expect(K.cause(K.OpenFailure.commitRefused("x")) == .commitRefused)
        #expect(K.clientError(K.OpenFailure.notInConversation).code == .endToEnd)
        #expect(K.clientError(K.OpenFailure.notInConversation).message == K.reason(K.OpenFailure.notInConversation))
        #expect(K.cause(ClientError("no such group", code: .noSuchGroup)) == .other)
    }
}
