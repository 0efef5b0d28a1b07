/* The plugin ABI is a header (include/bgtaskd_plugin.h); SwiftPM wants a source file. */
#include "bgtaskd_plugin.h"
