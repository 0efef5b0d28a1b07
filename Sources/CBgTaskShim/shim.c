#define _GNU_SOURCE
#include "bgtask_shim.h"

#include <systemd/sd-event.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

const uint64_t bgt_vtable_flag_deprecated = SD_BUS_VTABLE_DEPRECATED;
const uint64_t bgt_vtable_flag_hidden = SD_BUS_VTABLE_HIDDEN;
const uint64_t bgt_vtable_flag_unprivileged = SD_BUS_VTABLE_UNPRIVILEGED;
const uint64_t bgt_vtable_flag_no_reply = SD_BUS_VTABLE_METHOD_NO_REPLY;
const uint64_t bgt_vtable_flag_property_const = SD_BUS_VTABLE_PROPERTY_CONST;
const uint64_t bgt_vtable_flag_emits_change = SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE;
const uint64_t bgt_vtable_flag_emits_invalidation = SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION;
const uint64_t bgt_vtable_flag_absolute_offset = SD_BUS_VTABLE_ABSOLUTE_OFFSET;

const int bgt_event_off = SD_EVENT_OFF;
const int bgt_event_oneshot = SD_EVENT_ONESHOT;

sd_bus_vtable bgt_vtable_start(uint64_t flags) {
    sd_bus_vtable v = SD_BUS_VTABLE_START(flags);
    return v;
}

sd_bus_vtable bgt_vtable_method(const char *member, const char *signature, const char *result,
                                const char *names, sd_bus_message_handler_t handler,
                                size_t offset, uint64_t flags) {
    sd_bus_vtable v = SD_BUS_METHOD_WITH_OFFSET(member, signature, result, handler, offset, flags);
    /* The macro joins literal name lists; at run time the caller hands them in. */
    v.x.method.names = names;
    return v;
}

sd_bus_vtable bgt_vtable_signal(const char *member, const char *signature, const char *names,
                                uint64_t flags) {
    sd_bus_vtable v = SD_BUS_SIGNAL(member, signature, flags);
    v.x.signal.names = names;
    return v;
}

sd_bus_vtable bgt_vtable_property(const char *member, const char *signature,
                                  sd_bus_property_get_t getter, size_t offset, uint64_t flags) {
    sd_bus_vtable v = SD_BUS_PROPERTY(member, signature, getter, offset, flags);
    return v;
}

sd_bus_vtable bgt_vtable_writable_property(const char *member, const char *signature, sd_bus_property_get_t getter,
                                           sd_bus_property_set_t setter, size_t offset, uint64_t flags) {
    sd_bus_vtable v = SD_BUS_WRITABLE_PROPERTY(member, signature, getter, setter, offset, flags);
    return v;
}

sd_bus_vtable bgt_vtable_end(void) {
    sd_bus_vtable v = SD_BUS_VTABLE_END;
    return v;
}

int bgt_pidfd_open(pid_t pid) {
    long r = syscall(SYS_pidfd_open, pid, 0);
    if (r < 0) return -errno;
    /* pidfd_open sets O_CLOEXEC itself. */
    return (int) r;
}

int bgt_pidfd_send_signal(int pidfd, int sig) {
    long r = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
    return r < 0 ? -errno : 0;
}

int bgt_pidfd_exited(int pidfd) {
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    int r = poll(&p, 1, 0);
    if (r < 0) return -errno;
    return r > 0 && (p.revents & (POLLIN | POLLHUP)) ? 1 : 0;
}

int bgt_eventfd(void) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int bgt_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    /* EAGAIN means the counter is saturated: a wake-up is already pending. */
    return n < 0 && errno != EAGAIN ? -errno : 0;
}

int bgt_eventfd_drain(int fd) {
    uint64_t value;
    ssize_t n = read(fd, &value, sizeof value);
    return n < 0 && errno != EAGAIN ? -errno : 0;
}

int bgt_block_signal(int sig) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int bgt_raise_fd_limit(uint64_t *before, uint64_t *after) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
    *before = *after = rl.rlim_cur;
    rlim_t target = rl.rlim_max;
    if (target == RLIM_INFINITY) {
        /* The kernel refuses an unlimited soft limit for files: its ceiling is fs.nr_open. */
        FILE *f = fopen("/proc/sys/fs/nr_open", "re");
        unsigned long long nr_open = 0;
        if (f) {
            if (fscanf(f, "%llu", &nr_open) != 1) nr_open = 0;
            fclose(f);
        }
        target = nr_open > 0 ? (rlim_t) nr_open : 65536;
    }
    if (rl.rlim_cur >= target) return 0;
    rl.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
    *after = rl.rlim_cur;
    return 0;
}

uint64_t bgt_monotonic_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

int bgt_set_timer_slack(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0) < 0 ? -errno : 0;
}

int bgt_bus_error_set(sd_bus_error *error, const char *name, const char *message) {
    return sd_bus_error_set(error, name, message);
}

const char *bgt_errno_name(int error) {
    return strerrorname_np(error);
}

int bgt_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) < 0 ? -errno : 0;
}

/* A unix socket by inode, through NETLINK_SOCK_DIAG: its peer's inode and
 * its own bound name (what it listens on, for a server's accepted socket).
 * The name is written NUL-terminated; an abstract name starts with '@'. */
int bgt_unix_socket_info(uint64_t inode, uint64_t *peer, char *name, size_t name_size) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -errno;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = (uint32_t) -1;
    message.request.udiag_ino = (uint32_t) inode;
    message.request.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME;
    message.request.udiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.udiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    if (sendto(fd, &message, sizeof message, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0) {
        int error = -errno;
        close(fd);
        return error;
    }
    long buffer[2048];
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    int error = n < 0 ? -errno : 0;
    close(fd);
    if (n < 0) return error;
    *peer = 0;
    if (name_size > 0) name[0] = '\0';
    for (struct nlmsghdr *h = (struct nlmsghdr *) buffer; NLMSG_OK(h, (size_t) n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *failure = NLMSG_DATA(h);
            return failure->error < 0 ? failure->error : -EIO;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
        struct unix_diag_msg *answer = NLMSG_DATA(h);
        size_t length = h->nlmsg_len - NLMSG_LENGTH(sizeof *answer);
        for (struct rtattr *a = (struct rtattr *) (answer + 1); RTA_OK(a, length); a = RTA_NEXT(a, length)) {
            if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
                *peer = *(uint32_t *) RTA_DATA(a);
            } else if (a->rta_type == UNIX_DIAG_NAME && name_size > 1) {
                size_t size = RTA_PAYLOAD(a) < name_size - 1 ? RTA_PAYLOAD(a) : name_size - 1;
                memcpy(name, RTA_DATA(a), size);
                if (size > 0 && name[0] == '\0') name[0] = '@';
                name[size] = '\0';
            }
        }
        return 0;
    }
    return -ENOENT;
}

long bgt_getrandom(void *buffer, size_t length) {
    ssize_t got = getrandom(buffer, length, 0);
    return got < 0 ? -errno : (long) got;
}

int bgt_spawn_actions_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int bgt_socket_peer_pid(int fd) {
    struct ucred cred;
    socklen_t length = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) < 0) return -errno;
    return cred.pid > 0 ? cred.pid : -ESRCH;
}
