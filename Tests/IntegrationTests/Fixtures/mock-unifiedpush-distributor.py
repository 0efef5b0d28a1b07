#!/usr/bin/python3
"""A UnifiedPush distributor for bgtaskd's tests, on a bus of the test's own.

Speaks org.unifiedpush.Distributor2 (unless --v1-only) and Distributor1 at
/org/unifiedpush/Distributor: a Register succeeds, is recorded, and is
followed by NewEndpoint(https://push.example/<token>, with "?v1" for a
version 1 registration) to the connector.
The test drives it through org.bgtaskd.test.MockDistributor on the same
object: Registrations() -> aa{sv}; SendMessage(s token, ay message, s id),
SendEndpoint(s token, s endpoint) and SendUnregistered(s token) call the
connector of that token's registration (with its protocol version) and
return "" or the connector's error. Prints "ready" once it owns its name.
"""
import argparse
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

PATH = '/org/unifiedpush/Distributor'
CONNECTOR_PATH = '/org/unifiedpush/Connector'
CONTROL = 'org.bgtaskd.test.MockDistributor'


class Distributor(dbus.service.Object):
    # --broken-register: Register fails as a call (an error, not an answer).
    broken = False
    # --refuse-register: Register answers no.
    refuse = False
    # --answer-after SECONDS: Register answers that late.
    answer_after = 0.0

    def __init__(self, bus, v1_only):
        super().__init__(bus, PATH)
        self.bus = bus
        self.v1_only = v1_only
        self.registrations = {}

    def connector(self, token, member, v2_args, v1_args, done=None):
        entry = self.registrations.get(token)
        if entry is None:
            if done:
                done('no such token')
            return
        obj = self.bus.get_object(entry['service'], CONNECTOR_PATH, introspect=False)
        if entry['version'] == 2:
            method = obj.get_dbus_method(member, 'org.unifiedpush.Connector2')
            args = [dbus.Dictionary(v2_args, signature='sv')]
        else:
            method = obj.get_dbus_method(member, 'org.unifiedpush.Connector1')
            args = v1_args
        method(*args, reply_handler=lambda *r: done and done(''),
               error_handler=lambda e: done and done(e.get_dbus_name() or str(e)))

    def registered(self, service, token, description, version):
        self.registrations[token] = {'service': service, 'token': token, 'description': description,
                                     'version': version}
        # Version 1 registrations get an endpoint of their own, so a test can tell which registration it came from.
        endpoint = 'https://push.example/' + token + ('?v1' if version == 1 else '')
        GLib.idle_add(lambda: self.connector(token, 'NewEndpoint', {'token': token, 'endpoint': endpoint},
                                             [token, endpoint]) and False)

    @dbus.service.method('org.unifiedpush.Distributor1', in_signature='sss', out_signature='ss',
                         sender_keyword='sender')
    def Register(self, service, token, description, sender=None):
        if self.broken:
            raise dbus.exceptions.DBusException('the mock is broken', name='org.freedesktop.DBus.Error.Failed')
        if self.refuse:
            return ('REGISTRATION_FAILED', 'the mock refuses')
        self.registered(str(service), str(token), str(description), 1)
        return ('REGISTRATION_SUCCEEDED', '')

    @dbus.service.method('org.unifiedpush.Distributor1', in_signature='s', out_signature='')
    def Unregister(self, token):
        self.registrations.pop(str(token), None)

    @dbus.service.method(CONTROL, in_signature='', out_signature='aa{sv}')
    def Registrations(self):
        return dbus.Array([dbus.Dictionary({'service': e['service'], 'token': e['token'],
                                            'description': e['description'],
                                            'version': dbus.UInt32(e['version'])}, signature='sv')
                           for e in self.registrations.values()], signature='a{sv}')

    @dbus.service.method(CONTROL, in_signature='says', out_signature='s', async_callbacks=('ok', 'err'))
    def SendMessage(self, token, message, message_id, ok, err):
        payload = dbus.ByteArray(bytes(message))
        self.connector(str(token), 'Message', {'token': token, 'message': payload, 'id': message_id},
                       [token, payload, message_id], ok)

    @dbus.service.method(CONTROL, in_signature='ss', out_signature='s', async_callbacks=('ok', 'err'))
    def SendEndpoint(self, token, endpoint, ok, err):
        self.connector(str(token), 'NewEndpoint', {'token': token, 'endpoint': endpoint}, [token, endpoint], ok)

    @dbus.service.method(CONTROL, in_signature='s', out_signature='s', async_callbacks=('ok', 'err'))
    def SendUnregistered(self, token, ok, err):
        self.connector(str(token), 'Unregistered', {'token': token}, [token], ok)


class Distributor2(Distributor):
    @dbus.service.method('org.unifiedpush.Distributor2', in_signature='a{sv}', out_signature='a{sv}',
                         async_callbacks=('ok', 'err'))
    def Register(self, args, ok, err):
        def answer():
            if self.refuse:
                ok(dbus.Dictionary({'success': False, 'reason': 'the mock refuses'}, signature='sv'))
            else:
                self.registered(str(args['service']), str(args['token']), str(args.get('description', '')), 2)
                ok(dbus.Dictionary({'success': True}, signature='sv'))
            return False
        if self.answer_after > 0:
            GLib.timeout_add(int(self.answer_after * 1000), answer)
        else:
            answer()

    @dbus.service.method('org.unifiedpush.Distributor2', in_signature='a{sv}', out_signature='a{sv}')
    def Unregister(self, args):
        self.registrations.pop(str(args['token']), None)
        return dbus.Dictionary({}, signature='sv')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--address', required=True)
    parser.add_argument('--name', default='org.unifiedpush.Distributor.mock')
    parser.add_argument('--v1-only', action='store_true')
    parser.add_argument('--broken-register', action='store_true')
    parser.add_argument('--refuse-register', action='store_true')
    parser.add_argument('--answer-after', type=float, default=0.0)
    # --replaceable: another instance may take the name (--replace does).
    parser.add_argument('--replaceable', action='store_true')
    parser.add_argument('--replace', action='store_true')
    args = parser.parse_args()
    Distributor.broken = args.broken_register
    Distributor.refuse = args.refuse_register
    Distributor.answer_after = args.answer_after
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    distributor = (Distributor if args.v1_only else Distributor2)(bus, args.v1_only)
    name = dbus.service.BusName(args.name, bus, allow_replacement=args.replaceable, replace_existing=args.replace)
    print('ready', flush=True)
    GLib.MainLoop().run()


if __name__ == '__main__':
    main()
