/*
 * C helpers for the Swift shell. Swift cannot expand the sd-bus vtable macros
 * (bit fields, unions), cannot call variadic C functions, and does not see the
 * pidfd and eventfd system calls or what glibc declares only for _GNU_SOURCE;
 * each helper here covers one of those gaps and nothing more.
 */
#ifndef BGTASKD_SHIM_H
#define BGTASKD_SHIM_H

#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-bus-vtable.h>

/* sd-bus vtable flags, as typed constants (Swift sees the anonymous enum as Int). */
extern const uint64_t bgt_vtable_flag_deprecated;
extern const uint64_t bgt_vtable_flag_hidden;
extern const uint64_t bgt_vtable_flag_unprivileged;
extern const uint64_t bgt_vtable_flag_no_reply;
extern const uint64_t bgt_vtable_flag_property_const;
extern const uint64_t bgt_vtable_flag_emits_change;
extern const uint64_t bgt_vtable_flag_emits_invalidation;
extern const uint64_t bgt_vtable_flag_absolute_offset;

/* sd_event_source_set_enabled() modes. */
extern const int bgt_event_off;
extern const int bgt_event_oneshot;

/* One vtable entry per call, built by the official macros. Every string must
 * stay alive (and unmoved) for as long as the vtable is registered. `names` is
 * the NUL-separated list of argument names, in arguments first, then out
 * arguments, each terminated by NUL. */
sd_bus_vtable bgt_vtable_start(uint64_t flags);
sd_bus_vtable bgt_vtable_method(const char *member, const char *signature, const char *result,
                                const char *names, sd_bus_message_handler_t handler,
                                size_t offset, uint64_t flags);
sd_bus_vtable bgt_vtable_signal(const char *member, const char *signature, const char *names,
                                uint64_t flags);
sd_bus_vtable bgt_vtable_property(const char *member, const char *signature,
                                  sd_bus_property_get_t getter, size_t offset, uint64_t flags);
sd_bus_vtable bgt_vtable_writable_property(const char *member, const char *signature, sd_bus_property_get_t getter,
                                           sd_bus_property_set_t setter, size_t offset, uint64_t flags);
sd_bus_vtable bgt_vtable_end(void);

/* Process handles. Each returns -errno on failure. */
int bgt_pidfd_open(pid_t pid);
int bgt_pidfd_send_signal(int pidfd, int sig);
/* 1 when the process behind the pidfd has exited, 0 while it runs, -errno on error. */
int bgt_pidfd_exited(int pidfd);

/* An eventfd for cross-thread wake-ups: non-blocking, close-on-exec. */
int bgt_eventfd(void);
int bgt_eventfd_signal(int fd);
int bgt_eventfd_drain(int fd);

/* Blocks the given signal in the calling thread (sd-event needs it blocked). */
int bgt_block_signal(int sig);
/* Raises RLIMIT_NOFILE's soft limit to its hard limit: one pidfd per client process. */
/* Raises the soft open-file limit to the hard one (to fs.nr_open when the
 * hard one is unlimited). Writes the soft limit before and after; returns 0
 * or a negative errno. */
int bgt_raise_fd_limit(uint64_t *before, uint64_t *after);

/* A unix socket by inode (NETLINK_SOCK_DIAG): its peer's inode (0: none) and
 * its own bound name, NUL-terminated ('@' first for an abstract one). Returns
 * 0 or a negative errno (-ENOENT: no such socket). */
int bgt_unix_socket_info(uint64_t inode, uint64_t *peer, char *name, size_t name_size);
/* The pid of the process at the other end of a connected unix socket
 * (SO_PEERCRED), or a negative errno. */
int bgt_socket_peer_pid(int fd);
/* CLOCK_MONOTONIC in microseconds, as sd-event uses it. */
uint64_t bgt_monotonic_usec(void);
/* Sets the timer slack of the calling thread in nanoseconds (deadlines are enforced to the ms). */
int bgt_set_timer_slack(unsigned long nanoseconds);

/* pipe2(fds, O_CLOEXEC): atomic, so a process spawned by another thread never inherits the pipe. */
int bgt_pipe_cloexec(int fds[2]);

/* posix_spawn_file_actions_addclosefrom_np (glibc 2.34, hidden from Swift
 * without _GNU_SOURCE): the spawned process keeps no descriptor >= from. */
int bgt_spawn_actions_close_from(posix_spawn_file_actions_t *actions, int from);

/* getrandom(2) without flags: bytes from the kernel's generator, how many
 * were written, or a negative errno. */
long bgt_getrandom(void *buffer, size_t length);

/* The symbolic name of an errno value ("ECONNRESET"), or NULL if unknown. */
const char *bgt_errno_name(int error);

/* sd_bus_error_set with the message copied in (both arguments may be freed after). */
int bgt_bus_error_set(sd_bus_error *error, const char *name, const char *message);

#endif
