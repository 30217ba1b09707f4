/* child — see child.h. */
#include "child.h"
#include "clock.h"
#include "fcond.h"
#include "fiber.h"
#include "loop.h"
#include "stdio_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A child that stops reading its stdin for this long is treated as hung. */
#define WRITE_TIMEOUT_MS 10000
#define READ_CHUNK 65536
#define STDERR_LINE_MAX 4096
/* After closing its stdout, how long a child may take to exit by itself. */
#define EXIT_WAIT_MS 1000

extern char **environ;

struct child {
    pid_t pid;
    int in_fd, out_fd, err_fd; /* each reader closes its own when it ends */
    pthread_mutex_t mu;        /* guards the flags below */
    struct fcond cv;           /* broadcast when one of them changes */
    int writing;               /* a child_send owns in_fd */
    _Atomic int close_in;      /* child_stop: stdin is to be closed (by the writer, if any) */
    int out_done, err_done;    /* the readers have ended */
    /* The stdout reader ended without reaping the child (loop_stop
     * cancelled it): child_stop reaps it and reports its exit. */
    int orphaned;
    struct child_ops ops;
    void *arg;
    size_t max_message;
    _Atomic int exited; /* reaped */
    _Atomic int refs;   /* see child.h: the spawner's, plus one per holder and reader */
};

void child_describe_exit(int status, char *out, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "ended (wait status %d)", status);
}

/* ---- spawning ----
 *
 * PR_SET_PDEATHSIG fires when the *thread* that forked the child exits,
 * not the process. Request threads come and go, so every fork happens on
 * one thread that lives as long as mcpd: the spawner.
 *
 * The child shares mcpd's memory until it execs (clone with CLONE_VM and
 * CLONE_VFORK, on a stack of its own, as posix_spawn does; posix_spawn
 * itself cannot set PR_SET_PDEATHSIG). A fork would copy the page tables
 * of a process holding thousands of sessions and fiber stacks for every
 * child: with 1,000 children (a gateway, per-session mode) the forks alone
 * took most of a minute, one after another on this thread. Meanwhile the
 * spawner blocks every signal, and the child sets each handled one back to
 * its default before it lets them in, so no handler of mcpd's runs in it.
 * Sanitized builds fork: their runtimes must see the child, and would run
 * their own bookkeeping in it on mcpd's memory (the Release build's tests
 * run the clone: tests/run.sh, "children on the Release build"). */

struct spawn_req {
    char *const *argv;
    char **envp;
    const char *cwd;
    int fds[3]; /* the child's stdin, stdout, stderr */
    pid_t pid;
    int err; /* errno of a failed fork, or of a failed exec reported back */
    int done;
    struct spawn_req *next;
};

/* The caller of child_spawn may be a fiber (a request's, or a loop
 * fiber's): it parks while the spawner forks for it. */
static struct {
    pthread_mutex_t mu;
    struct fcond cv; /* initialized with the thread */
    struct spawn_req *queue;
    int started;
} spawner = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Runs in the forked child: only async-signal-safe calls until exec. */
static void exec_child(struct spawn_req *r, pid_t parent, int status_fd)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* mcpd blocks SIGTERM/SIGINT */
    signal(SIGPIPE, SIG_DFL);              /* mcpd ignores it; exec keeps that */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* mcpd died before the prctl took */
    if (dup2(r->fds[0], 0) < 0 || dup2(r->fds[1], 1) < 0 || dup2(r->fds[2], 2) < 0)
        goto fail;
    if (r->cwd && chdir(r->cwd) != 0)
        goto fail;
    execvpe(r->argv[0], r->argv, r->envp);
fail:;
    int e = errno;
    if (write(status_fd, &e, sizeof e) < 0)
        _exit(126);
    _exit(127);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPAWN_FORKS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPAWN_FORKS 1
#endif

/* Starts exec_child in a new process: the child's pid, or -1 with errno. */
#ifdef SPAWN_FORKS
static pid_t start_child(struct spawn_req *r, int status_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_child(r, parent, status_fd);
    return pid;
}
#else
#define SPAWN_STACK (256 * 1024)

struct clone_arg {
    struct spawn_req *r;
    pid_t parent;
    int status_fd;
};

static int clone_main(void *arg)
{
    struct clone_arg *a = arg;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            sigaction(s, &sa, NULL);
        }
    }
    exec_child(a->r, a->parent, a->status_fd);
    return 127;
}

static pid_t start_child(struct spawn_req *r, int status_fd)
{
    /* The spawner's alone on it, and it is reused: the child is done with
     * it once it execs, which CLONE_VFORK waits for. A page below it stays
     * unmapped, so an overflow faults instead of writing into mcpd. */
    static char *stack;
    if (!stack) {
        long page = sysconf(_SC_PAGESIZE);
        char *m = mmap(NULL, SPAWN_STACK + (size_t)page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            return -1;
        if (mprotect(m, (size_t)page, PROT_NONE) != 0) {
            munmap(m, SPAWN_STACK + (size_t)page);
            return -1;
        }
        stack = m + page;
    }
    struct clone_arg a = {r, getpid(), status_fd};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = clone(clone_main, stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}
#endif

static void do_spawn(struct spawn_req *r)
{
    /* A close-on-exec pipe tells exec success (EOF) from failure (errno). */
    int status[2];
    if (pipe2(status, O_CLOEXEC) != 0) {
        r->err = errno;
        return;
    }
    pid_t pid = start_child(r, status[1]);
    close(status[1]);
    if (pid < 0) {
        r->err = errno;
        close(status[0]);
        return;
    }
    int e = 0;
    ssize_t n;
    while ((n = read(status[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close(status[0]);
    if (n == sizeof e) {
        waitpid(pid, NULL, 0);
        r->err = e ? e : ENOEXEC;
        return;
    }
    r->pid = pid;
}

static void *spawner_main(void *unused)
{
    pthread_setname_np(pthread_self(), "mcpd-spawner");
    (void)unused;
    pthread_mutex_lock(&spawner.mu);
    for (;;) {
        while (!spawner.queue)
            fcond_wait_until(&spawner.cv, &spawner.mu, -1);
        struct spawn_req *r = spawner.queue;
        spawner.queue = r->next;
        pthread_mutex_unlock(&spawner.mu);
        do_spawn(r);
        pthread_mutex_lock(&spawner.mu);
        r->done = 1;
        fcond_broadcast(&spawner.cv);
    }
    return NULL;
}

static int spawn_on_spawner(struct spawn_req *r)
{
    pthread_mutex_lock(&spawner.mu);
    if (!spawner.started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (fcond_init(&spawner.cv) != 0) {
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&spawner.mu);
            return EAGAIN;
        }
        if (pthread_create(&t, &attr, spawner_main, NULL) != 0) {
            fcond_destroy(&spawner.cv);
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&spawner.mu);
            return EAGAIN;
        }
        pthread_attr_destroy(&attr);
        spawner.started = 1;
    }
    r->next = spawner.queue;
    spawner.queue = r;
    fcond_broadcast(&spawner.cv);
    while (!r->done)
        fcond_wait_until(&spawner.cv, &spawner.mu, -1);
    pthread_mutex_unlock(&spawner.mu);
    return r->err;
}

/* environ plus the extra entries (which win), plus PYTHONUNBUFFERED=1
 * unless set: a Python server without -u buffers stdout and its replies
 * would arrive late. mcpd's own MCPD_* settings are left out: an mcpd run
 * as the upstream would otherwise take MCPD_UPSTREAM too and start itself
 * again, without end. */
static char **build_env(char *const *extra)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    while (extra && extra[k])
        k++;
    char **envp = calloc(n + k + 2, sizeof *envp);
    if (!envp)
        return NULL;
    size_t o = 0;
    int have_unbuffered = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nlen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int overridden = strncmp(environ[i], "MCPD_", 5) == 0;
        for (size_t j = 0; j < k && !overridden; j++)
            overridden = strncmp(extra[j], environ[i], nlen) == 0 && extra[j][nlen] == '=';
        if (!overridden)
            envp[o++] = environ[i];
        have_unbuffered |= strncmp(environ[i], "PYTHONUNBUFFERED=", 17) == 0;
    }
    for (size_t j = 0; j < k; j++) {
        envp[o++] = extra[j];
        have_unbuffered |= strncmp(extra[j], "PYTHONUNBUFFERED=", 17) == 0;
    }
    if (!have_unbuffered)
        envp[o++] = "PYTHONUNBUFFERED=1";
    return envp;
}

/* ---- waiting ----
 *
 * The readers are loop fibers (loop.h) and their pipes are non-blocking:
 * a read that would block parks the fiber in loop_wait_fd, so a child costs
 * no thread. child_send and child_stop may run anywhere: on a loop fiber
 * they park the same way, on a plain thread they poll or sleep. */

/* Waits until fd is ready for reading (or writing) or the monotonic
 * deadline (-1: none). 0 when ready (or woken: the caller tries again),
 * ETIMEDOUT, ECANCELED (loop_stop), or another errno. */
static int wait_fd(int fd, int for_write, int64_t deadline)
{
    if (loop_on_fiber()) {
        int rc = loop_wait_fd(fd, for_write ? EPOLLOUT : EPOLLIN, deadline);
        return rc == EINTR ? 0 : rc;
    }
    int64_t left = deadline < 0 ? -1 : deadline - clock_mono_ms();
    if (deadline >= 0 && left <= 0)
        return ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = for_write ? POLLOUT : POLLIN};
    int n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    if (n < 0)
        return errno == EINTR ? 0 : errno;
    return n == 0 ? ETIMEDOUT : 0;
}

static int fiber_is_cancelled(void)
{
    struct fiber *f = fiber_current();
    return f && fiber_cancelled(f);
}

/* Waits for the child to exit, kills its group at the monotonic deadline,
 * and reaps it: *status is its wait status, or -1 when it was not ours to
 * reap. Returns 0; or -1 when the calling fiber is cancelled (loop_stop) and
 * may_leave: then it is left to child_stop. A cancelled fiber can no longer
 * park, so child_stop (may_leave 0) sleeps its thread in that case. */
static int reap(struct child *c, int64_t deadline, int may_leave, int *status)
{
    int killed = 0;
    for (;;) {
        pid_t r = waitpid(c->pid, status, WNOHANG);
        if (r == c->pid)
            return 0;
        if (r < 0 && errno != EINTR) {
            *status = -1;
            return 0;
        }
        if (!killed && clock_mono_ms() >= deadline) {
            kill(-c->pid, SIGKILL);
            killed = 1;
        }
        if (!fiber_is_cancelled()) {
            fiber_sleep_ms(10);
        } else if (may_leave) {
            return -1;
        } else {
            struct timespec ts = {0, 10 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

/* A reader ended: the last one out of child_stop's way, whose memory it
 * held. */
static void reader_done(struct child *c, int *done)
{
    pthread_mutex_lock(&c->mu);
    *done = 1;
    fcond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    child_release(c);
}

/* ---- reading ---- */

/* Reads a JSON message as it streams past, keeping only its top-level "id"
 * member's text and whether it has a top-level "method": enough to tie a
 * message that is dropped (never buffered) to the request it answers. Not
 * a validator: strings, nesting and the members at depth 1 are tracked,
 * and anything that is not an object is given up on. */
#define SCAN_ID_MAX 128
struct scan {
    int bad;    /* not an object: nothing more to learn from it */
    int closed; /* its top-level object has ended */
    int depth;
    int in_str, esc;
    int want_key; /* at depth 1, the next string is a member name */
    char key[8];  /* the member name being read (only short ones matter) */
    size_t key_len;
    int in_key, in_id; /* reading a member name / the "id" member's value */
    char id[SCAN_ID_MAX];
    size_t id_len;
    int id_long; /* the id was longer than SCAN_ID_MAX: unusable */
    int has_method;
    /* The decoder dropped this message: report it (once) when it ends. */
    int dropped, reported;
    enum stdio_frame_error error;
};

static void scan_reset(struct scan *s)
{
    memset(s, 0, sizeof *s);
}

static void scan_id_byte(struct scan *s, char ch)
{
    if (s->id_len < sizeof s->id)
        s->id[s->id_len++] = ch;
    else
        s->id_long = 1;
}

/* A member name ended: what follows its ':' is the value to look at. */
static void scan_member(struct scan *s)
{
    int is_id = s->key_len == 2 && memcmp(s->key, "id", 2) == 0;
    if (s->key_len == 6 && memcmp(s->key, "method", 6) == 0)
        s->has_method = 1;
    if (is_id) {
        /* The last "id" wins, as when the message is parsed. */
        s->id_len = 0;
        s->id_long = 0;
    }
    s->in_id = is_id;
}

/* Feeds p[0..n). Returns the bytes taken: all of them, or (with *line_end)
 * up to and including the '\n' that ends an NDJSON line, where a message
 * ends whatever its JSON says. */
static size_t scan_feed(struct scan *s, const char *p, size_t n, int ndjson, int *line_end)
{
    *line_end = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ndjson && ch == '\n') {
            *line_end = 1;
            return i + 1;
        }
        if (s->bad || s->closed)
            continue;
        if (s->in_str) {
            if (s->in_key && !s->esc && ch != '"') {
                if (s->key_len < sizeof s->key)
                    s->key[s->key_len++] = ch;
                else
                    s->key_len = sizeof s->key + 1; /* too long to matter */
            }
            if (s->in_id)
                scan_id_byte(s, ch);
            if (s->esc)
                s->esc = 0;
            else if (ch == '\\')
                s->esc = 1;
            else if (ch == '"')
                s->in_str = s->in_key = 0;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n')
            continue;
        if (s->depth == 0 && ch != '{') {
            s->bad = 1;
            continue;
        }
        int top = s->depth == 1;
        if (top && (ch == ',' || ch == '}')) {
            s->in_id = 0;
            s->want_key = ch == ',';
        } else if (s->in_id) {
            scan_id_byte(s, ch);
        }
        switch (ch) {
        case '{':
        case '[':
            if (++s->depth == 1)
                s->want_key = 1;
            break;
        case '}':
        case ']':
            if (--s->depth == 0)
                s->closed = 1;
            break;
        case '"':
            s->in_str = 1;
            if (top && s->want_key) {
                s->in_key = 1;
                s->key_len = 0;
            }
            break;
        case ':':
            if (top && s->want_key) {
                s->want_key = 0;
                scan_member(s);
            }
            break;
        default:
            break;
        }
    }
    return n;
}

static void report_dropped(struct child *c, struct scan *s)
{
    if (!s->dropped || s->reported)
        return;
    s->reported = 1;
    /* An id member whose value was cut short by the message's end is not one. */
    int have_id = s->id_len > 0 && !s->id_long && !s->in_id && !s->bad;
    struct child_dropped d = {.error = s->error,
                              .id = have_id ? s->id : NULL,
                              .id_len = have_id ? s->id_len : 0,
                              .has_method = s->has_method};
    c->ops.on_dropped(c->arg, &d);
}

/* Scans bytes of the message the scanner is in, up to its end (or all of
 * them), reporting it if it was dropped. Returns the bytes taken. */
static size_t scan_one(struct child *c, struct scan *s, const char *p, size_t n, int ndjson)
{
    int line_end;
    size_t k = scan_feed(s, p, n, ndjson, &line_end);
    if (s->dropped && (s->closed || line_end))
        report_dropped(c, s);
    if (line_end || (!ndjson && s->closed))
        scan_reset(s);
    return k;
}

/* Scans bytes the decoder consumed: in NDJSON every line that spans reads
 * (its beginning may turn out to be all there is of a dropped one), in
 * Content-Length framing only the body of a dropped message. */
static void scan_bytes(struct child *c, struct scan *s, const char *p, size_t n, int ndjson)
{
    while (n > 0 && (ndjson || s->dropped)) {
        size_t k = scan_one(c, s, p, n, ndjson);
        p += k;
        n -= k;
    }
}

/* One event (or none) of the decoder, with the bytes it consumed for it. */
static void reader_event(struct child *c, struct scan *s, int ndjson, const char *p, size_t used,
                         const struct stdio_frame_event *ev)
{
    if (!ev) {
        scan_bytes(c, s, p, used, ndjson);
        return;
    }
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        /* A dropped line ends with the first bytes the event consumed; a
         * dropped body that did not close by itself ended before them. */
        if (s->dropped && ndjson)
            scan_one(c, s, p, used, ndjson);
        report_dropped(c, s);
        scan_reset(s);
        c->ops.on_message(c->arg, ev->data, ev->len);
        return;
    }
    if (ndjson && s->dropped) {
        /* The previous dropped line ends first. */
        size_t k = scan_one(c, s, p, used, ndjson);
        if (k) /* at EOF p is NULL: no bytes, nothing to step over */
            p += k;
        used -= k;
    }
    report_dropped(c, s); /* a dropped body that never closed */
    if (!ndjson)
        scan_reset(s);
    s->dropped = 1;
    s->reported = 0;
    s->error = ev->error;
    if (ndjson) {
        /* The line's start is in s already; the rest follows. */
        scan_bytes(c, s, p, used, ndjson);
    } else if (ev->error != STDIO_FRAME_ERR_TOO_LARGE) {
        report_dropped(c, s); /* bad framing: no body to read an id from */
        scan_reset(s);
    }
}

/* The stdout reader, a loop fiber. */
static void reader_main(void *arg)
{
    struct child *c = arg;
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(c->max_message);
    char *buf = malloc(READ_CHUNK);
    struct scan s;
    scan_reset(&s);
    int cancelled = 0;
    for (;;) {
        ssize_t n = buf && d ? read(c->out_fd, buf, READ_CHUNK) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            int rc = wait_fd(c->out_fd, 0, -1);
            if (rc == 0)
                continue;
            cancelled = rc == ECANCELED;
            break;
        }
        if (n <= 0)
            break;
        size_t off = 0;
        while (off < (size_t)n) {
            size_t used = 0;
            struct stdio_frame_event ev;
            int got = stdio_frame_decode(d, buf + off, (size_t)n - off, &used, &ev);
            int ndjson = stdio_frame_framing(d) != STDIO_FRAMING_CONTENT_LENGTH;
            reader_event(c, &s, ndjson, buf + off, used, got ? &ev : NULL);
            off += used;
        }
    }
    struct stdio_frame_event ev;
    if (!cancelled && d && stdio_frame_finish(d, &ev)) {
        int ndjson = stdio_frame_framing(d) != STDIO_FRAMING_CONTENT_LENGTH;
        reader_event(c, &s, ndjson, NULL, 0, &ev);
    }
    if (!cancelled)
        report_dropped(c, &s);
    stdio_frame_decoder_free(d);
    free(buf);
    close(c->out_fd);

    /* stdout is closed: the child is exiting, has been told to, or has
     * stopped talking while still running, which makes it useless as a
     * server. Give it a moment to exit, then kill its group; either way reap
     * it so it never lingers as a zombie. Cancelled (mcpd is stopping its
     * loop), the reader cannot wait: child_stop does it. */
    int status = 0;
    if (cancelled || reap(c, clock_mono_ms() + EXIT_WAIT_MS, 1, &status) != 0) {
        pthread_mutex_lock(&c->mu);
        c->orphaned = 1;
        pthread_mutex_unlock(&c->mu);
    } else {
        c->exited = 1;
        c->ops.on_exit(c->arg, status);
    }
    reader_done(c, &c->out_done);
}

/* The stderr reader, a loop fiber: one on_stderr per line (cut at
 * STDERR_LINE_MAX). */
static void errreader_main(void *arg)
{
    struct child *c = arg;
    char line[STDERR_LINE_MAX];
    size_t len = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(c->err_fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR || (errno == EAGAIN && wait_fd(c->err_fd, 0, -1) == 0))
                continue;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n' || len == sizeof line - 1) {
                line[len] = '\0';
                if (len)
                    c->ops.on_stderr(c->arg, line, len);
                len = 0;
                if (buf[i] == '\n')
                    continue;
            }
            line[len++] = buf[i];
        }
    }
    if (len) {
        line[len] = '\0';
        c->ops.on_stderr(c->arg, line, len);
    }
    close(c->err_fd);
    reader_done(c, &c->err_done);
}

/* ---- lifecycle ---- */

struct child *child_spawn(const struct child_spec *spec, const struct child_ops *ops, void *arg,
                          char **err)
{
    *err = NULL;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
    struct child *c = calloc(1, sizeof *c);
    char **envp = build_env(spec->env);
    if (!c || !envp || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        if (asprintf(err, "cannot start %s: %s", spec->argv[0], strerror(errno)) < 0)
            *err = NULL;
        goto fail;
    }
    struct spawn_req r = {
        .argv = spec->argv, .envp = envp, .cwd = spec->cwd, .fds = {in[0], out[1], errp[1]}};
    int e = spawn_on_spawner(&r);
    close(in[0]);
    close(out[1]);
    close(errp[1]);
    in[0] = out[1] = errp[1] = -1;
    if (e) {
        if (asprintf(err, "cannot start %s: %s", spec->argv[0], strerror(e)) < 0)
            *err = NULL;
        goto fail;
    }
    free(envp);
    envp = NULL;
    c->pid = r.pid;
    c->in_fd = in[1];
    c->out_fd = out[0];
    c->err_fd = errp[0];
    /* Only mcpd's ends: the child's stay blocking, as a program expects. */
    for (int i = 0; i < 3; i++) {
        int fd = i == 0 ? c->in_fd : i == 1 ? c->out_fd : c->err_fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    c->ops = *ops;
    c->arg = arg;
    c->max_message = spec->max_message;
    pthread_mutex_init(&c->mu, NULL);
    fcond_init(&c->cv);
    c->refs = 2; /* the caller's and the stdout reader's */
    if (loop_spawn(reader_main, c) != 0) {
        kill(-c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        *err = strdup("cannot start the upstream reader (the event loop is not running)");
        close(c->in_fd);
        close(c->out_fd);
        close(c->err_fd);
        fcond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    child_hold(c); /* the stderr reader's */
    if (loop_spawn(errreader_main, c) != 0) {
        close(c->err_fd); /* unread, its writes would block the child */
        reader_done(c, &c->err_done);
    }
    return c;
fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    free(envp);
    free(c);
    return NULL;
}

/* Takes stdin for one message: a fiber parks while another write holds
 * it (which may wait seconds for a full pipe). 0, or -1 when stdin is
 * closing, or when a cancelled fiber would have to wait. */
static int write_lock(struct child *c)
{
    pthread_mutex_lock(&c->mu);
    while (c->writing && !c->close_in && !fiber_is_cancelled())
        fcond_wait_until(&c->cv, &c->mu, -1);
    int ok = !c->writing && !c->close_in && c->in_fd >= 0;
    if (ok)
        c->writing = 1;
    pthread_mutex_unlock(&c->mu);
    return ok ? 0 : -1;
}

/* Gives stdin back, closing it if child_stop asked meanwhile. */
static void write_unlock(struct child *c)
{
    pthread_mutex_lock(&c->mu);
    c->writing = 0;
    if (c->close_in && c->in_fd >= 0) {
        close(c->in_fd);
        c->in_fd = -1;
    }
    fcond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

int child_send(struct child *c, const char *msg, size_t len)
{
    struct iovec iov[2] = {{(void *)msg, len}, {"\n", 1}};
    size_t left = len + 1;
    int rc = 0;
    if (write_lock(c) != 0)
        return -1;
    int64_t deadline = clock_mono_ms() + WRITE_TIMEOUT_MS;
    while (left > 0 && !c->exited && !c->close_in) {
        ssize_t n = writev(c->in_fd, iov[0].iov_len ? iov : iov + 1, iov[0].iov_len ? 2 : 1);
        if (n < 0 && errno == EAGAIN) {
            if (wait_fd(c->in_fd, 1, deadline) != 0) {
                rc = -1;
                break;
            }
            continue;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        left -= (size_t)n;
        for (int i = 0; i < 2 && n > 0; i++) {
            size_t take = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            n -= (ssize_t)take;
        }
    }
    if (left > 0)
        rc = -1;
    write_unlock(c);
    return rc;
}

void child_stop(struct child *c, int64_t grace_ms)
{
    if (!c)
        return;
    /* Closing stdin is the polite stop for a stdio server (a write in
     * progress gives up, and closes it); SIGTERM to its group follows, then
     * SIGKILL if it is still there after the grace. The waits park a fiber
     * (a loop fiber's thread goes on with the child's own readers). */
    pthread_mutex_lock(&c->mu);
    c->close_in = 1;
    if (!c->writing && c->in_fd >= 0) {
        close(c->in_fd);
        c->in_fd = -1;
    }
    pthread_mutex_unlock(&c->mu);
    if (!c->exited)
        kill(-c->pid, SIGTERM);
    int64_t deadline = clock_mono_ms() + grace_ms;
    pthread_mutex_lock(&c->mu);
    while (!c->exited && !c->out_done && fcond_wait_until(&c->cv, &c->mu, deadline) != ETIMEDOUT)
        ;
    if (!c->exited && !c->orphaned)
        kill(-c->pid, SIGKILL);
    while (!c->out_done || !c->err_done)
        fcond_wait_until(&c->cv, &c->mu, -1);
    int orphaned = c->orphaned;
    pthread_mutex_unlock(&c->mu);
    if (orphaned) {
        int status = 0;
        reap(c, deadline, 0, &status);
        c->exited = 1;
        c->ops.on_exit(c->arg, status);
    }
    child_release(c);
}

void child_hold(struct child *c)
{
    if (c)
        atomic_fetch_add(&c->refs, 1);
}

void child_release(struct child *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    fcond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
