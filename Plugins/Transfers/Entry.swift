import BgTaskPluginKit

/// The one symbol the daemon looks for: this library's plugin descriptor.
@_cdecl("bgtaskd_plugin_entry")
public func bgtaskdPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TransfersMode.self)
}
