import XCTest

@testable import MicroHTTP

/// The SSE connection's rules on their own, without a socket: what the reader gets, when the
/// connection is suspended, resumed, or its socket shut, and which reason a stream ends with.
final class EventStreamStateTests: XCTestCase {
    private var buffer = [UInt8](repeating: 0, count: 64)

    private func read(_ state: inout EventStreamState, capacity: Int = 64) -> (EventStreamState.Read, String) {
        let result = buffer.withUnsafeMutableBytes {
            state.read(into: $0.baseAddress!, capacity: min(capacity, $0.count))
        }
        guard case let .bytes(count) = result else { return (result, "") }
        return (result, String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    func testAnEmptyQueueSuspendsAndTheNextSendResumesOnce() {
        var state = EventStreamState(queueLimit: 100)
        XCTAssertEqual(read(&state).0, .suspend)
        XCTAssertTrue(state.isSuspended)
        let first = state.send(Frame("a"), inBatch: false)
        XCTAssertTrue(first.queued)
        XCTAssertEqual(first.wake, .resume)
        XCTAssertEqual(state.send(Frame("b"), inBatch: false).wake, .none, "resumed already: no second resume")
        XCTAssertFalse(state.isSuspended)
        XCTAssertEqual(read(&state).1, "ab")
        XCTAssertEqual(state.queuedBytes, 0)
        XCTAssertEqual(read(&state).0, .suspend)
    }

    func testAFrameIsReadAcrossSmallBuffers() {
        var state = EventStreamState(queueLimit: 100)
        _ = state.send(Frame("hello"), inBatch: false)
        _ = state.send(Frame("world"), inBatch: false)
        var text = ""
        while case let (.bytes, piece) = read(&state, capacity: 3) { text += piece }
        XCTAssertEqual(text, "helloworld")
        XCTAssertEqual(state.queuedBytes, 0)
    }

    func testInABatchTheResumeWaitsForTheBatchsEnd() {
        var state = EventStreamState(queueLimit: 100)
        _ = read(&state)
        XCTAssertEqual(state.send(Frame("a"), inBatch: true).wake, .resumeAtBatchEnd)
        XCTAssertEqual(state.reader, .resumePending)
        XCTAssertTrue(state.isSuspended, "still suspended until the batch ends")
        XCTAssertEqual(state.send(Frame("b"), inBatch: true).wake, .none)
        XCTAssertTrue(state.takePendingResume())
        XCTAssertFalse(state.takePendingResume(), "once")
        // Completed before the batch ended: no resume of a finished connection.
        _ = read(&state)
        _ = read(&state)
        _ = state.send(Frame("c"), inBatch: true)
        _ = state.complete(clientGone: true, daemonShutdown: false)
        XCTAssertFalse(state.takePendingResume())
    }

    func testAFullQueueAbortsWithOverflow() {
        var state = EventStreamState(queueLimit: 4)
        XCTAssertTrue(state.send(Frame("abc"), inBatch: false).queued)
        let over = state.send(Frame("de"), inBatch: false)
        XCTAssertFalse(over.queued)
        XCTAssertEqual(over.wake, .shutDownSocket, "the reader is not suspended: the socket is shut")
        XCTAssertEqual(state.life, .aborting)
        XCTAssertEqual(state.queuedBytes, 0, "unsent bytes dropped")
        XCTAssertEqual(read(&state).0, .endWithError)
        XCTAssertFalse(state.send(Frame("x"), inBatch: false).queued)
        XCTAssertEqual(state.complete(clientGone: true, daemonShutdown: false), .overflow)
    }

    func testAnEmptyQueueTakesOneFrameLargerThanTheLimit() {
        var state = EventStreamState(queueLimit: 4)
        XCTAssertTrue(state.send(Frame("abcdefgh"), inBatch: false).queued, "a reader that keeps up gets it")
        XCTAssertEqual(read(&state).0, .bytes(8))
        XCTAssertTrue(state.send(Frame("abcdefgh"), inBatch: false).queued)
        XCTAssertFalse(state.send(Frame("x"), inBatch: false).queued, "behind it, the limit holds")
        XCTAssertEqual(state.life, .aborting)
    }

    func testAnAbortWakesASuspendedReaderToEndWithAnError() {
        var state = EventStreamState(queueLimit: 100)
        _ = read(&state)
        XCTAssertEqual(state.abort(.serverStopping, inBatch: false), .resume)
        XCTAssertEqual(read(&state).0, .endWithError)
        XCTAssertEqual(state.abort(.overflow, inBatch: false), .none, "once")
        // Woken inside a batch already: the batch's resume does it.
        var pending = EventStreamState(queueLimit: 100)
        _ = read(&pending)
        _ = pending.send(Frame("a"), inBatch: true)
        XCTAssertEqual(pending.abort(.serverStopping, inBatch: true), .none)
        XCTAssertTrue(pending.takePendingResume())
        XCTAssertEqual(read(&pending).0, .endWithError)
    }

    func testACloseWritesWhatIsQueuedThenItsFinalFrameThenEnds() {
        var state = EventStreamState(queueLimit: 100)
        _ = read(&state)
        _ = state.send(Frame("a"), inBatch: false)
        XCTAssertEqual(
            state.close(finalFrame: Frame("end"), reason: .closedByServer, inBatch: false), .none,
            "the send resumed it already")
        XCTAssertTrue(state.isClosed)
        XCTAssertFalse(state.send(Frame("late"), inBatch: false).queued)
        XCTAssertEqual(read(&state).1, "aend")
        XCTAssertEqual(read(&state).0, .endOfStream)
        XCTAssertEqual(
            state.close(finalFrame: nil, reason: .overflow, inBatch: false), .none, "later closes do nothing")
        XCTAssertEqual(state.complete(clientGone: false, daemonShutdown: false), .closedByServer)
        XCTAssertNil(state.complete(clientGone: true, daemonShutdown: true), "completes once")
    }

    func testACloseOfASuspendedStreamResumesIt() {
        var state = EventStreamState(queueLimit: 100)
        _ = read(&state)
        XCTAssertEqual(state.close(finalFrame: nil, reason: .closedByServer, inBatch: false), .resume)
        XCTAssertEqual(read(&state).0, .endOfStream)
    }

    func testAnAbortAfterACloseKeepsTheClosesReason() {
        var closed = EventStreamState(queueLimit: 100)
        _ = closed.close(finalFrame: nil, reason: .serverStopping, inBatch: false)
        _ = closed.abort(.overflow, inBatch: false)
        XCTAssertEqual(closed.complete(clientGone: true, daemonShutdown: true), .serverStopping)
    }

    func testTheReasonOfAnEndNobodyAskedForComesFromHowItEnded() {
        for (clientGone, shutdown, reason) in [
            (true, false, StreamCloseReason.clientGone), (false, true, .serverStopping),
            (false, false, .closedByServer),
        ] {
            var state = EventStreamState(queueLimit: 100)
            _ = read(&state)
            XCTAssertEqual(state.complete(clientGone: clientGone, daemonShutdown: shutdown), reason)
            XCTAssertFalse(state.isSuspended, "a completed connection is not suspended")
            XCTAssertEqual(state.send(Frame("a"), inBatch: false).wake, .none, "never resumed after completion")
        }
    }
}
