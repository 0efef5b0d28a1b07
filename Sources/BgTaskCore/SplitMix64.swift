/// A small, fast, seedable PRNG (Steele, Lea and Flood's SplitMix64), so a
/// generated trace, a benchmark's workload or a randomized test depends on
/// its seed alone — not on the standard library's random algorithms, which
/// may change between toolchains.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    public mutating func unit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// Uniform in `range`.
    public mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + unit() * (range.upperBound - range.lowerBound)
    }

    /// Uniform in `range` (modulo bias below 2⁻³², irrelevant here).
    public mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// Exponentially distributed with the given mean.
    public mutating func exponential(mean: Double) -> Double {
        -mean * log1p(-unit())
    }

    /// Triangular in [−halfWidth, halfWidth]: most values near 0.
    public mutating func triangular(halfWidth: Double) -> Double {
        (unit() + unit() - 1) * halfWidth
    }
}

import Foundation
