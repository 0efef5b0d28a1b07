/*
 * Starting apps for background events: fork + execve with a clean process
 * state, and reaping through a pidfd.
 *
 * Everything that needs memory or the file system's view of PATH happens in
 * the parent before fork; the child only makes async-signal-safe system calls
 * (the daemon is multi-threaded, so after fork nothing else is safe). Whether
 * execve worked is known when bgt_spawn returns: the child reports a failure
 * through a close-on-exec pipe, and the pipe closing without a report means
 * the new program is running.
 */
#ifndef BGTASKD_SPAWN_H
#define BGTASKD_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* Where a spawn failed, for the error message. */
enum bgt_spawn_stage {
    BGT_SPAWN_STAGE_NONE = 0,
    /* The program was not found (or not executable) in the search path. Parent. */
    BGT_SPAWN_STAGE_LOOKUP = 1,
    /* pipe, fork or pidfd_open failed. Parent. */
    BGT_SPAWN_STAGE_FORK = 2,
    /* Child: moving into the cgroup (writing "0" to cgroup.procs). */
    BGT_SPAWN_STAGE_CGROUP = 3,
    /* Child: signal mask and dispositions, RLIMIT_NOFILE, stdin, setsid. */
    BGT_SPAWN_STAGE_SETUP = 4,
    /* Child: execve itself. */
    BGT_SPAWN_STAGE_EXEC = 5,
};

/* What to start and how. All pointers are only read during the call. */
struct bgt_spawn_request {
    /* argv[0] is the program: a path when it holds a '/', else looked up in `search_path`. */
    char *const *argv;          /* NULL-terminated, at least one element */
    char *const *envp;          /* NULL-terminated */
    /* The PATH for the lookup (colon-separated; empty elements are skipped);
     * NULL means glibc's default "/bin:/usr/bin". */
    const char *search_path;
    /* The child's working directory; "/" when NULL or when chdir to it fails. */
    const char *directory;
    /* An open, writable cgroup.procs the child moves itself into before
     * execve, or -1 to stay in the parent's cgroup. */
    int cgroup_procs_fd;
};

/* What happened. On success `pid` and `pidfd` are set (the pidfd is
 * close-on-exec and the caller owns it; the child is not reaped). On failure
 * `stage` and `error` (an errno value) say why, and any child is reaped. */
struct bgt_spawn_result {
    pid_t pid;
    int pidfd;
    int stage;
    int error;
};

/* Starts the program. Returns 0, or -errno (then see result->stage). */
int bgt_spawn(const struct bgt_spawn_request *request, struct bgt_spawn_result *result);

/* The execvp-style lookup bgt_spawn does: writes the path of the program to
 * `out`. Returns 0, -ENOENT (not found), -EACCES (found, not executable) or
 * -ENAMETOOLONG. */
int bgt_spawn_find_program(const char *file, const char *search_path, char *out, size_t out_size);

/* How a reaped child ended. */
struct bgt_spawn_exit {
    /* CLD_EXITED, CLD_KILLED or CLD_DUMPED. */
    int code;
    /* The exit status for CLD_EXITED, else the signal number. */
    int status;
};

/* waitid(P_PIDFD, pidfd, WEXITED | WNOHANG): returns 1 and fills `exit` when
 * the child was reaped now, 0 when it still runs, -errno on error (-ECHILD
 * when it is not our child or was reaped already). The pidfd stays open. */
int bgt_spawn_reap(int pidfd, struct bgt_spawn_exit *exit);

#endif
