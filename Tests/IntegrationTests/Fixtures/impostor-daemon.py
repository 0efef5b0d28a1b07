#!/usr/bin/python3
"""Something that owns bgtaskd's bus name and answers as no bgtaskd would,
for bgtaskctl's tests: the Manager's Tasks property holds times of -inf,
-1e300 and NaN, and every other method fails with an error whose message
holds terminal control sequences. Prints "ready" once it owns the name.
"""
import argparse

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

NAME = 'org.bgtaskd.BackgroundTasks1'
PATH = '/org/bgtaskd/BackgroundTasks1'
MANAGER = NAME + '.Manager'
HOSTILE = 'cleared\x1b[2J\nforged line'


class Impostor(dbus.service.Object):
    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature='ss', out_signature='v')
    def Get(self, interface, name):
        if interface == MANAGER and name == 'Tasks':
            return dbus.Array([
                dbus.Struct((dbus.UInt32(1), 'org.example.A', 'minus infinity', float('-inf'))),
                dbus.Struct((dbus.UInt32(2), 'org.example.B', 'far below', -1e300)),
                dbus.Struct((dbus.UInt32(3), 'org.example.C', 'not a number', float('nan'))),
            ], signature='(ussd)')
        raise dbus.exceptions.DBusException(HOSTILE, name='org.bgtaskd.BackgroundTasks1.Error.Failed')

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface):
        raise dbus.exceptions.DBusException(HOSTILE, name='org.bgtaskd.BackgroundTasks1.Error.Failed')

    @dbus.service.method(MANAGER, in_signature='', out_signature='s')
    def GetBackgroundRefreshStatus(self):
        raise dbus.exceptions.DBusException(HOSTILE, name='org.bgtaskd.BackgroundTasks1.Error.Failed')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--address', required=True)
    args = parser.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    Impostor(bus, PATH)
    bus.request_name(NAME)
    print('ready', flush=True)
    GLib.MainLoop().run()


if __name__ == '__main__':
    main()
