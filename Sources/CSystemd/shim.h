#ifndef BGTASKD_CSYSTEMD_SHIM_H
#define BGTASKD_CSYSTEMD_SHIM_H
#include <systemd/sd-bus.h>
#include <systemd/sd-bus-vtable.h>
#include <systemd/sd-event.h>
#include <systemd/sd-daemon.h>
#endif
