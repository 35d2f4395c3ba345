import Foundation
import ReactorCore
import XCTest

final class PulseTests: XCTestCase {
    /// Semantics 1: counts exactly as ReactorKit's PulseTests.
    func testValueUpdatedCountRisesOnEveryAssignment() {
        struct State { @Pulse var value: Int = 0 }
        var state = State()
        XCTAssertEqual(state.$value.valueUpdatedCount, 0)
        state.value = 10
        XCTAssertEqual(state.$value.valueUpdatedCount, 1)
        XCTAssertEqual(state.$value.valueUpdatedCount, 1)  // reading doesn't count
        for (value, expected) in [(20, 2), (20, 3), (20, 4), (30, 5), (30, 6)] as [(Int, UInt)] {
            state.value = value
            XCTAssertEqual(state.$value.valueUpdatedCount, expected)
            XCTAssertEqual(state.value, value)
        }
    }

    func testValueUpdatedCountWrapsAtMax() {
        var pulse = Pulse(wrappedValue: 0)
        pulse.valueUpdatedCount = UInt.max
        pulse.value = 1
        XCTAssertEqual(pulse.valueUpdatedCount, 0)
        pulse.value = 2
        XCTAssertEqual(pulse.valueUpdatedCount, 1)
    }

    func testProjectedValueIsTheWrapper() {
        struct State { @Pulse var message: String? = nil }
        var state = State()
        state.message = "a"
        let pulse: Pulse<String?> = state.$message
        XCTAssertEqual(pulse.value, "a")
        XCTAssertEqual(pulse.valueUpdatedCount, 1)
    }

    func testCodableAsBareValue() throws {
        var state = CounterReactor.State()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        XCTAssertEqual(
            String(decoding: try encoder.encode(state), as: UTF8.self),
            #"{"alertMessage":null,"count":0}"#)
        state.alertMessage = "Hello"
        state.user = "jay"
        let json = String(decoding: try encoder.encode(state), as: UTF8.self)
        XCTAssertEqual(json, #"{"alertMessage":"Hello","count":0,"user":"jay"}"#)
        let decoded = try JSONDecoder().decode(CounterReactor.State.self, from: Data(json.utf8))
        XCTAssertEqual(decoded.alertMessage, "Hello")
        XCTAssertEqual(decoded.user, "jay")
        XCTAssertEqual(decoded.$alertMessage.valueUpdatedCount, 0)
        let null = try JSONDecoder().decode(
            CounterReactor.State.self, from: Data(#"{"alertMessage":null,"count":3}"#.utf8))
        XCTAssertNil(null.alertMessage)
        XCTAssertEqual(null.count, 3)
    }

    func testEqualityCountsAssignments() {
        var a = Pulse(wrappedValue: "x")
        let b = Pulse(wrappedValue: "x")
        XCTAssertEqual(a, b)
        a.value = "x"  // re-assigned: a new event, so no longer equal
        XCTAssertNotEqual(a, b)
    }

    func testSendable() {
        func requireSendable<T: Sendable>(_: T) {}
        requireSendable(Pulse(wrappedValue: 1))
    }
}
