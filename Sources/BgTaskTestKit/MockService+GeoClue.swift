extension MockService {
    /// A GeoClue2 template of our own (python-dbusmock ships none): a Manager
    /// handing out Clients that honour `DistanceThreshold` and
    /// `TimeThreshold`, report the current position as a new `Location`
    /// object with `LocationUpdated(old, new)` when started, and again when
    /// the mock's `Move(d latitude, d longitude, d accuracy)` moves the device
    /// past their thresholds (``MockSystemBus/moveDevice(latitude:longitude:accuracy:)``).
    /// `Allow(b)` (``MockSystemBus/allowLocation(_:)``) decides whether `Start` succeeds.
    static let geoclueTemplate = """
        '''GeoClue2 mock template (org.freedesktop.GeoClue2), from bgtaskd's tests.

        A Manager hands out Clients (GetClient, CreateClient, DeleteClient). A Client
        has DesktopId, DistanceThreshold (m), TimeThreshold (s) and
        RequestedAccuracyLevel; Start makes it Active and reports the current
        position at once, as a new Location object with LocationUpdated(old, new).
        The mock interface's Move(d latitude, d longitude, d accuracy) moves the
        device: every active client whose thresholds the move passes gets a new
        Location and LocationUpdated. The mock interface's Allow(b) decides whether
        Start succeeds (else AccessDenied, as when GeoClue's agent denies location).
        Parameters: Latitude, Longitude, Accuracy.
        '''
        import math
        import time

        import dbus

        from dbusmock import MOCK_IFACE, mockobject

        BUS_NAME = 'org.freedesktop.GeoClue2'
        MAIN_OBJ = '/org/freedesktop/GeoClue2/Manager'
        MAIN_IFACE = 'org.freedesktop.GeoClue2.Manager'
        SYSTEM_BUS = True

        CLIENT_IFACE = 'org.freedesktop.GeoClue2.Client'
        LOCATION_IFACE = 'org.freedesktop.GeoClue2.Location'


        def load(mock, parameters):
            mock.geo_clients = 0
            mock.geo_allowed = True
            mock.geo_locations = 0
            mock.geo_position = (float(parameters.get('Latitude', 0.0)), float(parameters.get('Longitude', 0.0)),
                                 float(parameters.get('Accuracy', 50.0)))
            mock.AddProperties(MAIN_IFACE, {'InUse': False, 'AvailableAccuracyLevel': dbus.UInt32(8)})


        def distance(a, b):
            '''Great-circle distance in metres between (lat, lon) pairs.'''
            p1, p2 = math.radians(a[0]), math.radians(b[0])
            dp, dl = p2 - p1, math.radians(b[1] - a[1])
            h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
            return 2 * 6371008.8 * math.asin(min(1.0, math.sqrt(h)))


        def new_location(manager):
            manager.geo_locations += 1
            path = f'/org/freedesktop/GeoClue2/Location/{manager.geo_locations}'
            latitude, longitude, accuracy = manager.geo_position
            now = time.time()
            manager.AddObject(path, LOCATION_IFACE, {
                'Latitude': dbus.Double(latitude), 'Longitude': dbus.Double(longitude), 'Accuracy': dbus.Double(accuracy),
                'Altitude': dbus.Double(-1.7976931348623157e308), 'Speed': dbus.Double(-1.0), 'Heading': dbus.Double(-1.0),
                'Description': '', 'Timestamp': dbus.Struct((dbus.UInt64(int(now)), dbus.UInt64(int((now % 1) * 1e6))), signature='tt'),
            }, [])
            return path


        def report(manager, client, force):
            '''Sends the current position to an active client if its thresholds allow.'''
            if not client.Get(CLIENT_IFACE, 'Active'):
                return
            position = manager.geo_position
            last = getattr(client, 'geo_last', None)
            if not force and last is not None:
                moved = distance(last[0], position)
                waited = time.monotonic() - last[1]
                if moved < client.Get(CLIENT_IFACE, 'DistanceThreshold') or waited < client.Get(CLIENT_IFACE, 'TimeThreshold'):
                    return
            old = client.Get(CLIENT_IFACE, 'Location')
            path = new_location(manager)
            client.Set(CLIENT_IFACE, 'Location', dbus.ObjectPath(path))
            client.geo_last = (position, time.monotonic())
            client.EmitSignal(CLIENT_IFACE, 'LocationUpdated', 'oo', [dbus.ObjectPath(old), dbus.ObjectPath(path)])


        def add_client(manager):
            manager.geo_clients += 1
            path = f'/org/freedesktop/GeoClue2/Client/{manager.geo_clients}'
            manager.AddObject(path, CLIENT_IFACE, {
                'Location': dbus.ObjectPath('/'), 'DistanceThreshold': dbus.UInt32(0), 'TimeThreshold': dbus.UInt32(0),
                'DesktopId': '', 'RequestedAccuracyLevel': dbus.UInt32(0), 'Active': False,
            }, [
                ('Start', '', '', f'objects["{MAIN_OBJ}"].geo_start(self)'),
                ('Stop', '', '', f'self.Set("{CLIENT_IFACE}", "Active", False)'),
            ])
            return path


        @dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o')
        def GetClient(self):
            return dbus.ObjectPath(add_client(self))


        @dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o')
        def CreateClient(self):
            return dbus.ObjectPath(add_client(self))


        @dbus.service.method(MAIN_IFACE, in_signature='o', out_signature='')
        def DeleteClient(self, path):
            self.RemoveObject(path)


        @dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='')
        def AddAgent(self, _desktop_id):
            pass


        def geo_report(self, client, force):
            report(self, client, force)


        def geo_start(self, client):
            if not self.geo_allowed:
                raise dbus.exceptions.DBusException(
                    f"'{client.Get(CLIENT_IFACE, 'DesktopId')}' disallowed, no agent for UID",
                    name='org.freedesktop.DBus.Error.AccessDenied')
            client.Set(CLIENT_IFACE, 'Active', True)
            report(self, client, True)


        mockobject.DBusMockObject.geo_report = geo_report
        mockobject.DBusMockObject.geo_start = geo_start


        @dbus.service.method(MOCK_IFACE, in_signature='b', out_signature='')
        def Allow(self, allowed):
            self.geo_allowed = bool(allowed)


        @dbus.service.method(MOCK_IFACE, in_signature='ddd', out_signature='')
        def Move(self, latitude, longitude, accuracy):
            self.geo_position = (float(latitude), float(longitude), float(accuracy))
            for path, client in list(mockobject.objects.items()):
                if path.startswith('/org/freedesktop/GeoClue2/Client/'):
                    report(self, client, False)
        """
}
