public import BgTaskProtocol

/// A crossing of a region's boundary: RegionEvent's `event` on the bus.
public typealias RegionEvent = LocationInterface.Crossing
