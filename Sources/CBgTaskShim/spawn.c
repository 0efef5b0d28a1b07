/*
 * fork + execve for launching apps (see bgtask_spawn.h).
 *
 * Implementation notes:
 * - The parent does everything that may allocate, lock or read the file
 *   system's state: the PATH lookup, RLIMIT_NOFILE's new value, the error
 *   pipe. The child, a copy of one thread of a multi-threaded process, calls
 *   only async-signal-safe functions (and setrlimit and close_range, thin
 *   system call wrappers) until execve.
 * - _Fork instead of fork: it runs no atfork handlers (which may take locks
 *   another thread held at the moment of the fork) and is async-signal-safe.
 * - All signals are blocked in the parent around the fork, so that no handler
 *   the daemon installed can run in the child before the child has reset the
 *   dispositions; the child then unblocks everything.
 * - The pidfd is opened right after the fork, before anything could reap the
 *   child, so it always refers to this child and never to a recycled pid
 *   (unless SIGCHLD is ignored, which makes the kernel reap on its own; the
 *   daemon must not do that).
 */
#define _GNU_SOURCE
#include "bgtask_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The soft RLIMIT_NOFILE apps get: select() cannot handle descriptors >= FD_SETSIZE. */
#define BGT_SPAWN_NOFILE_SOFT 1024

/* The kernel's struct sigaction (x86-64, arm64): glibc's sigaction() refuses
 * its two internal signals (32, 33) with EINVAL, so those are reset with the
 * raw system call; an inherited SIG_IGN on them would otherwise survive execve. */
#if defined(__x86_64__) || defined(__aarch64__)
#define BGT_RAW_SIGACTION 1
struct kernel_sigaction_dfl {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};
#endif

/* What the child writes to the error pipe when it cannot exec. */
struct child_report {
    int stage;
    int error;
};

static bool is_executable_file(const char *path, bool *exists) {
    struct stat st;
    if (stat(path, &st) < 0) return false;
    *exists = true;
    /* execve refuses directories and other non-regular files with EACCES. */
    return S_ISREG(st.st_mode) && faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

int bgt_spawn_find_program(const char *file, const char *search_path, char *out, size_t out_size) {
    size_t file_length = strlen(file);
    if (file_length == 0) return -ENOENT;
    if (strchr(file, '/') != NULL) {
        /* A path: used as it is; execve reports what is wrong with it. */
        if (file_length + 1 > out_size) return -ENAMETOOLONG;
        memcpy(out, file, file_length + 1);
        return 0;
    }
    if (search_path == NULL) search_path = "/bin:/usr/bin";
    bool found_unusable = false;
    const char *element = search_path;
    for (;;) {
        const char *end = strchrnul(element, ':');
        size_t length = (size_t) (end - element);
        /* An empty element means the working directory to execvp; a daemon
         * has no meaningful one, so it is skipped. */
        if (length > 0) {
            if (length + 1 + file_length + 1 > out_size) return -ENAMETOOLONG;
            memcpy(out, element, length);
            out[length] = '/';
            memcpy(out + length + 1, file, file_length + 1);
            bool exists = false;
            if (is_executable_file(out, &exists)) return 0;
            if (exists) found_unusable = true;
        }
        if (*end == '\0') break;
        element = end + 1;
    }
    return found_unusable ? -EACCES : -ENOENT;
}

/* Never returns. Async-signal-safe calls only. */
static void run_child(const char *path, const struct bgt_spawn_request *request,
                      const struct rlimit *nofile, int report_fd) {
    struct child_report report = { .stage = BGT_SPAWN_STAGE_SETUP, .error = 0 };
    int null_fd;
    ssize_t n;

    /* Dispositions first, mask second: nothing inherited may run in here.
     * Handlers would be reset by execve anyway, but ignored signals would
     * stay ignored in the app. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        if (sigaction(sig, &dfl, NULL) < 0 && errno == EINVAL) {
#ifdef BGT_RAW_SIGACTION
            struct kernel_sigaction_dfl raw = { .handler = SIG_DFL };
            (void) syscall(SYS_rt_sigaction, sig, &raw, NULL, sizeof raw.mask);
#endif
        }
    }
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) goto fail;

    /* Into the app's cgroup before anything else, so that whatever the child
     * does is accounted there. cgroup v2 takes "0" as "the writing process". */
    if (request->cgroup_procs_fd >= 0) {
        report.stage = BGT_SPAWN_STAGE_CGROUP;
        do n = write(request->cgroup_procs_fd, "0", 1); while (n < 0 && errno == EINTR);
        if (n < 0) goto fail;
        report.stage = BGT_SPAWN_STAGE_SETUP;
    }

    if (setrlimit(RLIMIT_NOFILE, nofile) < 0) goto fail;

    /* Descriptors the daemon leaked without O_CLOEXEC (by another thread, a
     * library) must not reach the app; close-on-exec rather than closed,
     * because the cgroup and report descriptors are still needed. Kernels
     * before 5.11 lack the flag: then this is skipped. */
    (void) syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);

    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) goto fail;
    if (null_fd != STDIN_FILENO) {
        /* dup2 clears O_CLOEXEC on the new descriptor. */
        if (dup2(null_fd, STDIN_FILENO) < 0) goto fail;
        (void) close(null_fd);
    } else if (fcntl(STDIN_FILENO, F_SETFD, 0) < 0) {
        goto fail;
    }

    /* Its own session: no controlling terminal, and a signal to the daemon's
     * process group does not reach the app. */
    if (setsid() < 0) goto fail;

    if (request->directory == NULL || chdir(request->directory) < 0) (void) chdir("/");

    report.stage = BGT_SPAWN_STAGE_EXEC;
    execve(path, request->argv, request->envp);

fail:
    report.error = errno != 0 ? errno : EIO;
    (void) write(report_fd, &report, sizeof report);
    _exit(127);
}

int bgt_spawn(const struct bgt_spawn_request *request, struct bgt_spawn_result *result) {
    memset(result, 0, sizeof *result);
    result->pid = -1;
    result->pidfd = -1;

    if (request->argv == NULL || request->argv[0] == NULL) {
        result->stage = BGT_SPAWN_STAGE_LOOKUP;
        result->error = ENOENT;
        return -ENOENT;
    }
    char path[PATH_MAX];
    int r = bgt_spawn_find_program(request->argv[0], request->search_path, path, sizeof path);
    if (r < 0) {
        result->stage = BGT_SPAWN_STAGE_LOOKUP;
        result->error = -r;
        return r;
    }

    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) < 0) {
        result->stage = BGT_SPAWN_STAGE_FORK;
        result->error = errno;
        return -errno;
    }
    if (nofile.rlim_max < BGT_SPAWN_NOFILE_SOFT) nofile.rlim_cur = nofile.rlim_max;
    else nofile.rlim_cur = BGT_SPAWN_NOFILE_SOFT;

    int report_pipe[2];
    /* O_CLOEXEC atomically: the write end closes on execve, which is how the
     * parent learns that the exec worked. */
    if (pipe2(report_pipe, O_CLOEXEC) < 0) {
        result->stage = BGT_SPAWN_STAGE_FORK;
        result->error = errno;
        return -errno;
    }

    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid = _Fork();
    if (pid == 0) {
        (void) close(report_pipe[0]);
        run_child(path, request, &nofile, report_pipe[1]);
    }
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    (void) close(report_pipe[1]);
    if (pid < 0) {
        (void) close(report_pipe[0]);
        result->stage = BGT_SPAWN_STAGE_FORK;
        result->error = fork_errno;
        return -fork_errno;
    }

    int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
    int pidfd_errno = errno;

    struct child_report report;
    ssize_t n;
    do n = read(report_pipe[0], &report, sizeof report); while (n < 0 && errno == EINTR);
    (void) close(report_pipe[0]);

    if (n == 0 && pidfd >= 0) {
        result->pid = pid;
        result->pidfd = pidfd;
        return 0;
    }

    /* The child failed (or we cannot track it): make sure it is gone and reaped. */
    if (n == 0) {
        /* exec worked but there is no pidfd: an untracked app is worse than none. */
        (void) kill(pid, SIGKILL);
        report.stage = BGT_SPAWN_STAGE_FORK;
        report.error = pidfd_errno;
    } else if (n != (ssize_t) sizeof report) {
        report.stage = BGT_SPAWN_STAGE_FORK;
        report.error = n < 0 ? errno : EIO;
        (void) kill(pid, SIGKILL);
    }
    if (pidfd >= 0) (void) close(pidfd);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    if (report.error == 0) report.error = EIO;
    result->stage = report.stage;
    result->error = report.error;
    return -report.error;
}

int bgt_spawn_reap(int pidfd, struct bgt_spawn_exit *exit) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid((idtype_t) P_PIDFD, (id_t) pidfd, &info, WEXITED | WNOHANG) < 0) return -errno;
    /* WNOHANG with nothing to reap leaves si_pid at 0. */
    if (info.si_pid == 0) return 0;
    exit->code = info.si_code;
    exit->status = info.si_status;
    return 1;
}
