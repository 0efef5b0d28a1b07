import Foundation

/// A coarse spatial index: which regions a point may lie in. The Earth is cut
/// into cells of ``cellDegrees`` of latitude and longitude; a region is filed
/// under every cell its circle touches, so a point's cell lists every region
/// that can contain it, and an update looks at those, not at all regions.
struct RegionGrid<Key: Hashable & Sendable>: Sendable {
    struct Cell: Hashable, Sendable {
        var latitude: Int
        var longitude: Int
    }

    /// 0.05°: about 5.6 km north–south; a 100 m region touches one to four cells.
    static var cellDegrees: Double { 0.05 }
    /// Regions whose box spans more cells than this (huge, or near a pole)
    /// are kept apart and always looked at.
    static var maximumCells: Int { 4096 }

    private var cells: [Cell: [Key]] = [:]
    private var filed: [Key: [Cell]] = [:]
    /// Regions too wide to file by cell.
    private var wide: Set<Key> = []

    static func cell(of point: GeoCoordinate) -> Cell {
        Cell(latitude: Int((point.latitude / cellDegrees).rounded(.down)),
             longitude: Int((point.longitude / cellDegrees).rounded(.down)))
    }

    mutating func insert(_ key: Key, center: GeoCoordinate, radius: Double) {
        remove(key)
        // The box of the circle on the sphere the distances are measured on:
        // its angle north and south, and asin(sin angle / cos latitude) east
        // and west (wider than angle / cos latitude, by about 100 m at 100 km
        // and 60°). A little more, for rounding; a circle over a pole is wide.
        let angle = radius / GeoCoordinate.earthRadius * (1 + 1e-9) + Self.cellDegrees / 1000 * .pi / 180
        let dLat = angle * 180 / .pi
        let cosine = cos(center.latitude * .pi / 180), sine = sin(min(angle, .pi / 2))
        guard cosine > 0.01, sine < cosine, abs(center.latitude) + dLat < 90 else { return fileWide(key) }
        let dLon = asin(sine / cosine) * 180 / .pi
        let low = Self.cell(of: GeoCoordinate(latitude: center.latitude - dLat, longitude: center.longitude - dLon))
        let high = Self.cell(of: GeoCoordinate(latitude: center.latitude + dLat, longitude: center.longitude + dLon))
        let count = (high.latitude - low.latitude + 1) * (high.longitude - low.longitude + 1)
        // Boxes that cross the antimeridian or are too large are looked at always.
        guard center.longitude - dLon >= -180, center.longitude + dLon <= 180, count <= Self.maximumCells else {
            return fileWide(key)
        }
        var list: [Cell] = []
        for latitude in low.latitude...high.latitude {
            for longitude in low.longitude...high.longitude {
                let cell = Cell(latitude: latitude, longitude: longitude)
                cells[cell, default: []].append(key)
                list.append(cell)
            }
        }
        filed[key] = list
    }

    private mutating func fileWide(_ key: Key) {
        wide.insert(key)
        filed[key] = []
    }

    mutating func remove(_ key: Key) {
        guard let list = filed.removeValue(forKey: key) else { return }
        wide.remove(key)
        for cell in list {
            cells[cell]?.removeAll { $0 == key }
            if cells[cell]?.isEmpty == true { cells[cell] = nil }
        }
    }

    /// Every region that may contain `point` (and perhaps a few that do not); a key may come twice.
    func candidates(near point: GeoCoordinate) -> [Key] {
        (cells[Self.cell(of: point)] ?? []) + wide
    }
}
