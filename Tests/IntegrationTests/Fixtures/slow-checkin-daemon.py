#!/usr/bin/python3
"""Owns bgtaskd's bus name and answers the SDK's Manager calls as a daemon
would, except that each CheckIn is answered only after --checkin-delay
seconds while later calls are answered at once: the window in which an
app's own SetApplicationState goes out behind a re-check-in. Prints "ready"
once it owns the name, then one line per call ("call CheckIn org.example.A",
"call SetApplicationState active") and "replied CheckIn" when it answers one.
GetBackgroundTimeRemaining answers 0: a call that marks a point in the order.
BeginBackgroundTask answers ids 1, 2, ... with 600 s ("call BeginBackgroundTask upload");
EndBackgroundTask is printed ("call EndBackgroundTask 1").
"""
import argparse

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NAME = 'org.bgtaskd.BackgroundTasks1'
PATH = '/org/bgtaskd/BackgroundTasks1'
MANAGER = NAME + '.Manager'


class SlowDaemon(dbus.service.Object):
    def __init__(self, bus, delay):
        super().__init__(bus, PATH)
        self.delay = delay
        self.last_task = 0

    @dbus.service.method(MANAGER, in_signature='s', out_signature='a{sv}',
                         async_callbacks=('reply', 'error'))
    def CheckIn(self, app_id, reply, error):
        print('call CheckIn', app_id, flush=True)

        def answer():
            # Printed before the answer leaves: an app that has the answer
            # can then count on the line being there.
            print('replied CheckIn', flush=True)
            reply(dbus.Dictionary({'reason': dbus.String('user'), 'pending': dbus.UInt32(0)}, signature='sv'))
            return False
        GLib.timeout_add(int(self.delay * 1000), answer)

    @dbus.service.method(MANAGER, in_signature='s', out_signature='')
    def SetApplicationState(self, state):
        print('call SetApplicationState', state, flush=True)

    @dbus.service.method(MANAGER, in_signature='', out_signature='d')
    def GetBackgroundTimeRemaining(self):
        print('call GetBackgroundTimeRemaining', flush=True)
        return 0.0

    @dbus.service.method(MANAGER, in_signature='s', out_signature='ud')
    def BeginBackgroundTask(self, name):
        print('call BeginBackgroundTask', name, flush=True)
        self.last_task += 1
        return (dbus.UInt32(self.last_task), 600.0)

    @dbus.service.method(MANAGER, in_signature='u', out_signature='')
    def EndBackgroundTask(self, task):
        print('call EndBackgroundTask', int(task), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--address', required=True)
    parser.add_argument('--checkin-delay', type=float, default=0)
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    SlowDaemon(bus, args.checkin_delay)
    bus.request_name(NAME)
    print('ready', flush=True)
    GLib.MainLoop().run()


if __name__ == '__main__':
    main()
