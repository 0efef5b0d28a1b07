/*
 * bgtaskd mode plugin ABI, version 1.11 (1.1 adds method calls to other
 * services, the icon in bgt_app_info and BGT_EVENT_APP_WOKEN; 1.2 adds
 * batch_begin and batch_rollback to the descriptor, version 2; 1.3 adds the
 * plugin's configuration keys and error names to the descriptor, version 3;
 * 1.4 adds calls to services on the system bus and signal subscriptions;
 * 1.5 adds waiting_events to the descriptor, version 4; 1.6 adds
 * export_interface_at; 1.7 adds post, the one host function other threads
 * may call; 1.8 adds power_state, the machine's power as the daemon follows it;
 * 1.9 adds flags to the descriptor, version 5; 1.10 adds
 * BGT_EVENT_SYSTEM_BUS_BACK; 1.11 adds BGT_EVENT_APP_WAKE_ENDED).
 *
 * A mode plugin (fetch, remote-notification, location, transfer) is a shared library
 * named libbgtaskd-mode-<name>.so that exports one symbol:
 *
 *     const bgt_plugin_descriptor *bgtaskd_plugin_entry(void);
 *
 * The daemon loads it with dlopen(RTLD_NOW | RTLD_LOCAL) and accepts it when
 * descriptor->abi_major == BGTASKD_PLUGIN_ABI_MAJOR and
 * descriptor->abi_minor <= BGTASKD_PLUGIN_ABI_MINOR, and name and version are
 * non-empty. Plugin and host speak only through this header: the host hands
 * the plugin a table of functions (bgt_host_api), the plugin hands the host a
 * table of its own (bgt_plugin_descriptor). No C++ and no Swift types cross.
 *
 * Threading: every call in either direction happens on the daemon's one event
 * loop thread. A plugin must not block (no sleeping, no synchronous network)
 * and must not call the host from other threads, with one exception: post
 * (1.7), which hands work done on a plugin's own threads back to the loop.
 *
 * Memory: strings the host passes in are valid until the callback returns;
 * strings the plugin passes to the host are copied. bgt_message handles are
 * owned by whoever created them until sent (send functions take ownership).
 *
 * Compatibility: a minor version adds fields at the end of the tables only.
 * Both tables start with their size, so each side can tell what the other has.
 */
#ifndef BGTASKD_PLUGIN_H
#define BGTASKD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BGTASKD_PLUGIN_ABI_MAJOR 1
#define BGTASKD_PLUGIN_ABI_MINOR 11
#define BGTASKD_PLUGIN_DESCRIPTOR_VERSION 5
/* The symbol every plugin exports. */
#define BGTASKD_PLUGIN_ENTRY_SYMBOL "bgtaskd_plugin_entry"

/* Opaque handles. */
typedef struct bgt_host bgt_host;       /* the host's side of one loaded plugin */
typedef struct bgt_call bgt_call;       /* a D-Bus method call in flight */
typedef struct bgt_message bgt_message; /* a D-Bus message being read or written */

/* Log priorities, as syslog's. */
enum {
    BGT_LOG_ERROR = 3,
    BGT_LOG_WARNING = 4,
    BGT_LOG_NOTICE = 5,
    BGT_LOG_INFO = 6,
    BGT_LOG_DEBUG = 7,
};

/* Return codes: 0 or positive on success, a negative errno on failure. The
 * host functions use -ENOENT (no such app, token or record), -EINVAL (bad
 * argument), -EPERM (not allowed), -EALREADY (already done), -EIO (storage),
 * and those named where they are used. A call that fails has no effect
 * beyond what its own description names (a failed reply still answers the
 * caller; a message passed to a send is consumed either way). */

/* Who is calling a plugin's D-Bus method. */
typedef struct bgt_caller {
    const char *connection; /* unique bus name, ":1.42" */
    const char *app_id;     /* the caller's app id, NULL when it has none */
    int32_t pid;
    uint32_t uid;
    uint8_t trusted;        /* unsandboxed and of the daemon's user (root on the system bus) */
    uint8_t sandboxed;
} bgt_caller;

/* One member of an interface a plugin exports. Argument names are
 * comma-separated ("token,result"), one per complete type of the signature. */
enum { BGT_MEMBER_METHOD = 1, BGT_MEMBER_SIGNAL = 2 };

typedef struct bgt_member {
    uint32_t kind;              /* BGT_MEMBER_METHOD or BGT_MEMBER_SIGNAL */
    const char *name;
    const char *in_signature;   /* a method's arguments; a signal's body */
    const char *in_names;
    const char *out_signature;  /* a method's reply; NULL or "" for signals */
    const char *out_names;
} bgt_member;

typedef struct bgt_interface {
    const char *name;           /* e.g. "org.bgtaskd.BackgroundTasks1.Fetch" */
    const bgt_member *members;
    size_t n_members;
} bgt_interface;

/* What the host knows about an app (bgt_host_api.app_info). */
typedef struct bgt_app_info {
    uint32_t struct_size;       /* set by the caller: sizeof(bgt_app_info) */
    uint8_t known;              /* has a desktop entry */
    uint8_t running;            /* has a checked-in connection */
    uint8_t launching;          /* the daemon started it; not checked in yet */
    uint8_t _reserved;
    const char *state;          /* "active", "inactive", "background"; NULL when not running */
    const char *refresh_status; /* "available", "denied", "restricted" */
    const char *modes;          /* the declared modes, ';'-separated, as in the desktop entry */
    const char *name;           /* the entry's Name, NULL if none */
    /* 1.1 */
    const char *icon;           /* the entry's Icon, NULL if none */
} bgt_app_info;

/* Events the host sends a plugin (bgt_plugin_descriptor.event). */
enum {
    /* A connection checked in as app_id; reason is its launch reason. Sent
     * again when the same connection checks in again: the CheckIn reply
     * counts what the plugin holds for the app (waiting_events), and the
     * plugin sends it to that connection as the first time. Handle it as
     * "send what waits", not as a new instance. */
    BGT_EVENT_APP_CHECKED_IN = 1,
    /* app_id moved to state ("active", "inactive", "background"). */
    BGT_EVENT_APP_STATE_CHANGED = 2,
    /* The last connection and process of app_id are gone. */
    BGT_EVENT_APP_GONE = 3,
    /* The time asked for with schedule_opportunity came, or the machine woke:
     * a good moment to wake apps (realtime_usec is now). */
    BGT_EVENT_WAKE_OPPORTUNITY = 4,
    /* A token of this plugin can be delivered now: send its event to connection. */
    BGT_EVENT_TOKEN_READY = 5,
    /* A token was completed by its app (complete_token). */
    BGT_EVENT_TOKEN_COMPLETED = 6,
    /* A token's budget ran out before it was completed; the app is being
     * terminated. Count it as the app's offence. */
    BGT_EVENT_TOKEN_EXPIRED = 7,
    /* The set of desktop entries changed (apps added, removed or edited). */
    BGT_EVENT_APPS_CHANGED = 8,
    /* Background App Refresh settings or the power state changed. */
    BGT_EVENT_REFRESH_CHANGED = 9,
    /* Launching app_id for a token failed (reason says why); its tokens are dropped. */
    BGT_EVENT_LAUNCH_FAILED = 10,
    /* 1.1: another plugin's wake was delivered to app_id at connection (reason:
     * that plugin's mode). Events waiting for the app may ride along now. */
    BGT_EVENT_APP_WOKEN = 11,
    /* 1.2: the machine goes to sleep (state "sleeping") or woke (state
     * "awake"). Nothing runs in the background while it sleeps; after a wake
     * the backlog is drained in turns, and a WAKE_OPPORTUNITY follows. */
    BGT_EVENT_SLEEP_CHANGED = 12,
    /* 1.10: the system bus is back after the connection to it was lost (its
     * bus daemon crashed or restarted; every subscription there was called
     * once with NULL then). Subscribe again, and read again what the
     * services there said: it may have changed meanwhile. The host tries to
     * reconnect after 1 s, then at doubling intervals up to a minute (from
     * the last interval, if the bus was lost again within 30 s of coming
     * back). Sent only to plugins built for 1.10 or later. */
    BGT_EVENT_SYSTEM_BUS_BACK = 13,
    /* 1.11: another plugin's wake of app_id, delivered before with
     * BGT_EVENT_APP_WOKEN, ended (reason: that plugin's mode; state:
     * "completed" when the app completed it in time, "expired" when its
     * budget ran out, "failed" when it ended otherwise: the launch failed
     * or the app went before taking it). What the other mode's wake brought
     * the app counts only once it completed. Sent only to plugins built for
     * 1.11 or later whose descriptor sets BGT_PLUGIN_WANTS_WAKE_ENDS. */
    BGT_EVENT_APP_WAKE_ENDED = 14,
};

/* 1.8: the machine's power as the daemon follows it on the system bus (UPower,
 * power-profiles-daemon), so that a plugin need not watch those services
 * itself. A change comes as BGT_EVENT_REFRESH_CHANGED. */
typedef struct bgt_power_state {
    uint32_t struct_size;       /* set by the caller: sizeof(bgt_power_state) */
    int8_t on_battery;          /* 1 on battery, 0 on AC power, -1 unknown */
    uint8_t power_saver;        /* the active power profile is power-saver */
    uint8_t _reserved[2];
    double battery_percent;     /* the battery's charge, 0-100; NaN when unknown or no battery */
} bgt_power_state;

typedef struct bgt_event {
    uint32_t struct_size;
    uint32_t type;              /* BGT_EVENT_* */
    const char *app_id;         /* NULL for WAKE_OPPORTUNITY, APPS_CHANGED, REFRESH_CHANGED */
    const char *connection;     /* APP_CHECKED_IN, TOKEN_READY, APP_WOKEN */
    const char *state;          /* APP_STATE_CHANGED, SLEEP_CHANGED, APP_WAKE_ENDED */
    const char *token;          /* TOKEN_* */
    const char *reason;         /* APP_CHECKED_IN: launch reason; LAUNCH_FAILED: why; APP_WOKEN, APP_WAKE_ENDED: the other mode */
    uint64_t realtime_usec;     /* when, on CLOCK_REALTIME */
} bgt_event;

/* 1.3: one key of the plugin's configuration, set as `Key=VALUE` under
 * `[Section]` in bgtaskd.conf or with `--set Section.Key=VALUE`. The host
 * reads and checks every value before any plugin is initialised (a bad value
 * stops the daemon with exit status 78, naming the file, line and key), lists
 * the keys in `bgtaskd --help`, and answers config() with the value as text,
 * or with default_value when nobody set it. A plugin whose keys are malformed
 * (a name not `Section.Key`, a section of the daemon's own or of another
 * plugin, a default outside its own limits) is refused. */
enum {
    BGT_CONFIG_NUMBER = 1,      /* a finite number, written as a decimal ("30", "2.5") */
    BGT_CONFIG_INTEGER = 2,     /* a whole number */
};

typedef struct bgt_config_key {
    const char *name;           /* "Fetch.WakeBudgetSec" */
    uint32_t type;              /* BGT_CONFIG_NUMBER or BGT_CONFIG_INTEGER */
    uint8_t positive;           /* 0 itself is refused too */
    double minimum;             /* the least value accepted */
    double maximum;             /* the greatest value accepted */
    const char *unit;           /* "seconds", "metres", "bytes"; NULL or "" for none */
    const char *default_value;  /* the value when unset, as text */
    const char *help;           /* one line for bgtaskd --help */
} bgt_config_key;

/* 1.3: a D-Bus error name the plugin answers calls with (reply_error), for
 * the documentation and the host's checks; the host logs a warning when a
 * plugin answers with a name it did not declare (org.freedesktop.DBus.Error.*
 * names need no declaration). */
typedef struct bgt_error_name {
    const char *name;           /* "org.bgtaskd.BackgroundTasks1.Error.PayloadTooLarge" */
    const char *help;           /* when it is answered */
} bgt_error_name;

/* Called for each record by record_list. */
typedef void (*bgt_record_fn)(void *userdata, const char *key, const void *data, size_t size);
/* Called for each app by list_apps. */
typedef void (*bgt_app_fn)(void *userdata, const char *app_id);
/* 1.1: called once with the answer to method_call_send: the reply, or NULL
 * and the error's name and message (valid during the call only). Since 1.4
 * what the plugin writes and sends from here is one batch, as for an event. */
typedef void (*bgt_reply_fn)(void *userdata, bgt_message *reply, const char *error_name, const char *error_message);
/* 1.4: the buses a plugin reaches: the daemon's own (the user's session bus,
 * where apps are) and the system bus (GeoClue, NetworkManager ...). */
enum {
    BGT_BUS_USER = 0,
    BGT_BUS_SYSTEM = 1,
};
/* 1.4: called for each signal a subscription matches (signal_subscribe); the
 * message is valid during the call only. What the plugin writes and sends
 * from here is one batch, as for an event. */
typedef void (*bgt_signal_fn)(void *userdata, bgt_message *signal);
/* Called for each foreground interval by usage_history (CLOCK_REALTIME µs; end 0 = still open). */
typedef void (*bgt_usage_fn)(void *userdata, uint64_t start_usec, uint64_t end_usec);

/* The host's functions, handed to init(). */
typedef struct bgt_host_api {
    uint32_t struct_size;       /* sizeof(bgt_host_api) as the host knows it */
    uint16_t abi_major;
    uint16_t abi_minor;

    /* Logging and clocks. */
    void (*log)(bgt_host *host, int priority, const char *message);
    uint64_t (*monotonic_usec)(bgt_host *host);
    uint64_t (*realtime_usec)(bgt_host *host);
    /* A configuration value by key ("Fetch.WakeBudgetSec"), as text; NULL if
     * unknown. Since 1.3, a key the plugin declared always has a value. */
    const char *(*config)(bgt_host *host, const char *key);

    /* D-Bus: export an interface on /org/bgtaskd/BackgroundTasks1 (call from start()).
     * -EINVAL for the daemon's own interface, a stock mode's (unless the
     * plugin is that mode), one exported at that path already, and members
     * without an array. Only an exported interface's signals may be sent. */
    int (*export_interface)(bgt_host *host, const bgt_interface *interface);
    /* A new signal of one of the plugin's interfaces; write its body, then send it. */
    bgt_message *(*signal_new)(bgt_host *host, const char *interface, const char *member);
    /* Sends a signal to one connection only; takes ownership of the message.
     * -EINVAL unless the signal is one the plugin's own exported interfaces
     * declare, with the declared arguments. */
    int (*signal_send)(bgt_host *host, bgt_message *signal, const char *connection);
    /* Frees a message that will not be sent. */
    void (*message_free)(bgt_message *message);

    /* Messages. A bgt_message is the host's own handle to a D-Bus message; it
     * is read and written one value at a time with D-Bus type codes. read()
     * takes a basic type code and a pointer of the matching C type (const
     * char ** for "s", "o", "g"; int32_t for "b"; uint64_t for "t" ...); it
     * returns 1 on success and 0 at the end of a container. enter()/open()
     * take a container type ('a', 'v', 'r', 'e') and its contents' signature;
     * exit()/close() leave it. Strings read are valid while the message is.
     * append() takes the value itself for strings (a const char * for "s",
     * "o", "g", which must be valid UTF-8) and a pointer to it otherwise.
     * Every function returns a negative errno on failure (-ENXIO: no more
     * values; -EBADMSG: a value of another type or an unreadable string).
     * A message an append(), open() or close() failed on is never sent:
     * reply_send() then answers the call org.freedesktop.DBus.Error.Failed and
     * returns -EBADMSG, signal_send() and method_call_send() refuse it. */
    int (*message_read)(bgt_message *message, char type, void *value);
    int (*message_enter)(bgt_message *message, char type, const char *contents);
    int (*message_exit)(bgt_message *message);
    /* Type of the next value (0 at the end) and, for containers, its contents. */
    int (*message_peek)(bgt_message *message, char *type, const char **contents);
    int (*message_skip)(bgt_message *message, const char *signature);
    int (*message_append)(bgt_message *message, char type, const void *value);
    int (*message_open)(bgt_message *message, char type, const char *contents);
    int (*message_close)(bgt_message *message);

    /* Calls: the arguments, the caller, and exactly one reply. A plugin that
     * replies later retains the call first and releases it after replying.
     * A call neither replied to nor retained when handle_call returns is
     * answered with org.freedesktop.DBus.Error.Failed by the host. */
    bgt_message *(*call_arguments)(bgt_call *call);
    const bgt_caller *(*call_caller)(bgt_call *call);
    bgt_message *(*reply_new)(bgt_call *call);
    /* -EINVAL when the reply's arguments are not the method's declared out
     * signature: the caller then gets org.freedesktop.DBus.Error.Failed.
     * -EINVAL too, and the call still unanswered, for a reply made by
     * reply_new() for another call. */
    int (*reply_send)(bgt_call *call, bgt_message *reply);
    /* error_name: a full D-Bus error name ("org.bgtaskd.BackgroundTasks1.Error.NoSuchToken",
     * "org.freedesktop.DBus.Error.InvalidArgs"). -EINVAL for a malformed
     * name: the caller then gets org.freedesktop.DBus.Error.Failed. */
    int (*reply_error)(bgt_call *call, const char *error_name, const char *message);
    void (*call_retain)(bgt_call *call);
    void (*call_release)(bgt_call *call);

    /* Apps. */
    int (*app_info)(bgt_host *host, const char *app_id, bgt_app_info *info);
    /* Every known app whose desktop entry declares mode. */
    int (*list_apps)(bgt_host *host, const char *mode, bgt_app_fn each, void *userdata);
    /* Wakes app_id for reason (a mode name) with budget_sec to complete:
     * launches it in the background if it is not running. Writes a one-shot,
     * unguessable token (NUL-terminated, at most 64 bytes) to token_out. The
     * token is delivered with BGT_EVENT_TOKEN_READY once the app can take it.
     * reason must be the plugin's own mode (-EPERM otherwise) and the budget
     * 0.001 s to one day (-EINVAL); -ENOBUFS when token_size has no room for
     * the token (checked first: nothing is woken); -EAGAIN while the app's
     * launches back off after failing. */
    int (*wake_app)(bgt_host *host, const char *app_id, const char *reason, double budget_sec,
                    char *token_out, size_t token_size);
    /* The app behind connection completed token: -ENOENT when the token is
     * unknown, spent, expired or belongs to another app. */
    int (*complete_token)(bgt_host *host, const char *token, const char *connection);
    /* Asks for a BGT_EVENT_WAKE_OPPORTUNITY at realtime_usec (0 cancels);
     * a later call replaces an earlier one. */
    int (*schedule_opportunity)(bgt_host *host, uint64_t realtime_usec);
    /* Foreground intervals of app_id since since_usec, oldest first. The
     * daemon keeps them 60 days, and only for apps with a desktop entry; an
     * app back in the foreground within a minute of leaving it continues
     * its last interval. */
    int (*usage_history)(bgt_host *host, const char *app_id, uint64_t since_usec, bgt_usage_fn each,
                         void *userdata);

    /* Durable records of this plugin, in the daemon's database. A
     * handle_call with the events it sets off, and the events the host
     * delivers together at other times, are one batch: its writes are
     * committed together when it returns (group commit). The call's reply
     * goes out only after that commit, and so does every signal sent after
     * the first write: nobody hears of a write before it is on disk. A signal
     * sent before any write of the batch goes out at once; what the batch did
     * up to then needed no commit and is known outside, so the batch starts
     * again there (the host calls batch_begin again, from inside the send: a
     * later failure undoes only what came after).
     *
     * If the commit fails (the disk is full, an I/O error), nothing of the
     * batch takes effect: the reply becomes the error
     * org.bgtaskd.BackgroundTasks1.Error.StorageFailed (its message says
     * why), held signals are dropped, wakes the batch asked for are
     * cancelled (no offence, no launch), events it set off are dropped, and
     * the host calls the descriptor's batch_rollback so that the plugin's
     * memory forgets the batch too. The events the batch was handed that it
     * did not set off tell of what happened regardless (a wake's budget ran
     * out, an app quit): to a plugin with batch_rollback the host hands them
     * again, in order, before any later event (after a backoff of 0.5 s to
     * 8 s, or with the plugin's next call). record_put and record_delete fail with
     * -EIO (-ENOSPC when the disk is full) when SQLite refuses at once.
     * Collections and keys are valid UTF-8 (-EINVAL otherwise); a record
     * holds at most 64 MiB (-EFBIG, before anything is copied); deleting a
     * record that is not there succeeds.
     * Writes made at any other time (start, stop) are on disk when they
     * return. */
    int (*record_put)(bgt_host *host, const char *collection, const char *key, const void *data, size_t size);
    int (*record_delete)(bgt_host *host, const char *collection, const char *key);
    int (*record_list)(bgt_host *host, const char *collection, bgt_record_fn each, void *userdata);

    /* Why the last host call of this plugin that failed did so ("not launching
     * org.example.App for another 60 s: …"); valid until the next host call. */
    const char *(*last_error)(bgt_host *host);

    /* 1.1: calls a method of another service on the daemon's bus (for example
     * org.freedesktop.Notifications.Notify). Write the arguments into the
     * message from method_call_new, then send it: method_call_send takes
     * ownership and calls reply exactly once, from the loop, never from inside
     * method_call_send. timeout_usec 0 means the default (25 s). */
    bgt_message *(*method_call_new)(bgt_host *host, const char *destination, const char *path,
                                    const char *interface, const char *member);
    int (*method_call_send)(bgt_host *host, bgt_message *call, uint64_t timeout_usec, bgt_reply_fn reply,
                            void *userdata);

    /* 1.4: a call to a service on `bus` (BGT_BUS_USER is method_call_new's
     * bus), sent with method_call_send like any other. NULL when that bus
     * cannot be reached (last_error says why); the daemon connects to the
     * system bus the first time a plugin asks for it. A call never starts
     * a service that is not running (no D-Bus activation). */
    bgt_message *(*bus_method_call_new)(bgt_host *host, uint32_t bus, const char *destination, const char *path,
                                        const char *interface, const char *member);
    /* 1.4: calls fn for every signal on `bus` that matches; NULL matches
     * anything (arg0 matches the first argument when it is a string, as a
     * match rule's arg0 does: NameOwnerChanged of one name). Writes an id
     * for signal_unsubscribe to id_out. The subscription lasts until
     * unsubscribed or the plugin stops. If the system bus connection is
     * lost, fn is called once with the message NULL: subscriptions on that
     * bus are gone. The plugin may subscribe again later: the daemon
     * reconnects when asked, and since 1.10 by itself, and then sends
     * BGT_EVENT_SYSTEM_BUS_BACK. */
    int (*signal_subscribe)(bgt_host *host, uint32_t bus, const char *sender, const char *path,
                            const char *interface, const char *member, const char *arg0, bgt_signal_fn fn,
                            void *userdata, uint64_t *id_out);
    /* 1.4: ends a subscription; fn is not called again. -ENOENT for an
     * unknown id, and for another plugin's. */
    int (*signal_unsubscribe)(bgt_host *host, uint64_t id);

    /* 1.6: export_interface on another object path of the daemon's bus, for
     * protocols that fix the path (UnifiedPush calls its connectors at
     * /org/unifiedpush/Connector). Calls reach handle_call as any other;
     * the caller is whoever called, not necessarily an app. Call from start().
     * Such an interface declares no signals (-EINVAL): signals go out from
     * /org/bgtaskd/BackgroundTasks1 only. */
    int (*export_interface_at)(bgt_host *host, const char *path, const bgt_interface *interface);

    /* 1.7: the one function a plugin may call from any thread. Runs
     * fn(userdata) on the loop thread, soon, in the order posted, as one
     * batch (as a signal callback runs: it may write records, send signals
     * and wake apps). For plugins that do work on threads of their own (an
     * HTTP client). -ENOTSUP where the host has no loop (offline tools).
     * Posts still queued when the plugin is stopped are dropped without
     * calling fn: stop() must end the plugin's threads' posting before it
     * returns, and the plugin frees what such posts carried. */
    int (*post)(bgt_host *host, void (*fn)(void *userdata), void *userdata);

    /* 1.8: fills *state (as much as its struct_size holds) with the power
     * state the daemon follows; what the daemon does not know reads as
     * unknown (everything, where the host follows nothing: offline tools).
     * Loop thread only. -EINVAL for no state. */
    int (*power_state)(bgt_host *host, bgt_power_state *state);
} bgt_host_api;

/* The plugin's functions. */
typedef struct bgt_plugin_descriptor {
    uint32_t struct_version;    /* BGTASKD_PLUGIN_DESCRIPTOR_VERSION */
    uint16_t abi_major;         /* BGTASKD_PLUGIN_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor;         /* BGTASKD_PLUGIN_ABI_MINOR the plugin was built with */
    const char *name;           /* the mode: "fetch", "remote-notification", "location"
                                 * ([a-z][a-z0-9-]*, as in the file name) */
    const char *version;        /* the plugin's own version, "1.0.0" */

    /* Creates the plugin's state. On failure returns NULL and writes why to error. */
    void *(*init)(const bgt_host_api *api, bgt_host *host, char *error, size_t error_size);
    /* Exports interfaces, loads records, schedules. Negative errno (and error) on failure. */
    int (*start)(void *plugin, char *error, size_t error_size);
    /* The daemon is stopping: finish writes; the plugin is freed afterwards. */
    void (*stop)(void *plugin);
    /* A method of one of the plugin's interfaces was called. */
    void (*handle_call)(void *plugin, const char *interface, const char *member, bgt_call *call);
    /* Something happened (bgt_event.type). */
    void (*event)(void *plugin, const bgt_event *event);
    /* Adds what the plugin knows about app_id to an open a{sv} (for bgtaskctl apps):
     * append dictionary entries ("e", "sv") to dict. May be NULL. */
    void (*describe_app)(void *plugin, const char *app_id, bgt_message *dict);

    /* Descriptor version 2 (ABI 1.2); a host reads these only from a
     * descriptor whose struct_version is at least 2. Either may be NULL.
     * batch_begin: a batch begins, or starts again after a signal that went
     * out at once (see the durable records above; it may be called from
     * inside signal_send): remember what batch_rollback must restore.
     * batch_rollback: that batch's commit failed: restore the memory
     * remembered at batch_begin. A plugin without them keeps in memory what
     * a failed batch changed. batch_commit: the batch's writes are on disk
     * (for log lines that must not claim what a failed commit undid). */
    void (*batch_begin)(void *plugin);
    void (*batch_rollback)(void *plugin);
    void (*batch_commit)(void *plugin);

    /* Descriptor version 3 (ABI 1.3); read only from a descriptor whose
     * struct_version is at least 3. The plugin's configuration keys and
     * error names (see bgt_config_key and bgt_error_name); the arrays live as
     * long as the library. Either count may be 0. */
    const bgt_config_key *config_keys;
    size_t n_config_keys;
    const bgt_error_name *error_names;
    size_t n_error_names;

    /* Descriptor version 4 (ABI 1.5); may be NULL. How many events the
     * plugin holds for app_id that it has not asked a wake for and will
     * deliver once the app checks in (held pushes, location events that
     * waited while refresh was off): the host adds them to CheckIn's
     * `pending`, which counts the wakes it holds itself. */
    uint32_t (*waiting_events)(void *plugin, const char *app_id);

    /* Descriptor version 5 (ABI 1.9): BGT_PLUGIN_* flags. */
    uint32_t flags;
} bgt_plugin_descriptor;

/* The plugin's wakes are background wakes that Background App Refresh
 * governs (fetch, silent pushes, location events; not finished transfers).
 * When refresh stops being available for an app, the host fails those of
 * its wakes that still wait for the app (held while the machine sleeps, or
 * waiting their turn after a wake), unless the app is in the foreground or
 * being launched: BGT_EVENT_LAUNCH_FAILED with the reason, no offence, no
 * launch backoff. The plugin keeps their events for a later wake, as it
 * would have held them had refresh been off when they came. */
#define BGT_PLUGIN_WAKES_NEED_REFRESH 1u

/* 1.11: the plugin is told how other plugins' wakes it heard of with
 * BGT_EVENT_APP_WOKEN end (BGT_EVENT_APP_WAKE_ENDED). Only plugins that set
 * it are: each event is a batch of the plugin's, on the path of every wake. */
#define BGT_PLUGIN_WANTS_WAKE_ENDS 2u

/* Every plugin defines this. */
const bgt_plugin_descriptor *bgtaskd_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif
