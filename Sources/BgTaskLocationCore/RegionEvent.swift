/// A crossing of a region's boundary (`RegionEvent`'s `event`).
public enum RegionEvent: String, Sendable, CaseIterable {
    case enter
    case exit
}
