/* child — see child.h. */
#include "child.h"
#include "clock.h"
#include "fiber.h"
#include "stdio_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    int in_fd, out_fd, err_fd;
    pthread_t reader, errreader;
    pthread_mutex_t write_mu;
    struct child_ops ops;
    void *arg;
    size_t max_message;
    _Atomic int exited;
    _Atomic int refs; /* see child.h: the spawner's, plus one per holder */
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
 * one thread that lives as long as mcpd: the spawner. */

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

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct spawn_req *queue;
    int started;
} spawner = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

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

static void do_spawn(struct spawn_req *r)
{
    /* A close-on-exec pipe tells exec success (EOF) from failure (errno). */
    int status[2];
    if (pipe2(status, O_CLOEXEC) != 0) {
        r->err = errno;
        return;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_child(r, parent, status[1]);
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
            pthread_cond_wait(&spawner.cv, &spawner.mu);
        struct spawn_req *r = spawner.queue;
        spawner.queue = r->next;
        pthread_mutex_unlock(&spawner.mu);
        do_spawn(r);
        pthread_mutex_lock(&spawner.mu);
        r->done = 1;
        pthread_cond_broadcast(&spawner.cv);
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
        if (pthread_create(&t, &attr, spawner_main, NULL) != 0) {
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&spawner.mu);
            return EAGAIN;
        }
        pthread_attr_destroy(&attr);
        spawner.started = 1;
    }
    r->next = spawner.queue;
    spawner.queue = r;
    pthread_cond_broadcast(&spawner.cv);
    while (!r->done)
        pthread_cond_wait(&spawner.cv, &spawner.mu);
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

static void *reader_main(void *arg)
{
    pthread_setname_np(pthread_self(), "mcpd-child-out");
    struct child *c = arg;
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(c->max_message);
    char *buf = malloc(READ_CHUNK);
    struct scan s;
    scan_reset(&s);
    for (;;) {
        ssize_t n = buf && d ? read(c->out_fd, buf, READ_CHUNK) : 0;
        if (n < 0 && errno == EINTR)
            continue;
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
    if (d && stdio_frame_finish(d, &ev)) {
        int ndjson = stdio_frame_framing(d) != STDIO_FRAMING_CONTENT_LENGTH;
        reader_event(c, &s, ndjson, NULL, 0, &ev);
    }
    report_dropped(c, &s);
    stdio_frame_decoder_free(d);
    free(buf);

    /* stdout is closed: the child is exiting, has been told to, or has
     * stopped talking while still running, which makes it useless as a
     * server. Give it a moment to exit, then kill its group; either way reap
     * it so it never lingers as a zombie. */
    int status = 0;
    pid_t r;
    int64_t deadline = clock_mono_ms() + EXIT_WAIT_MS;
    while ((r = waitpid(c->pid, &status, WNOHANG)) == 0 && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        kill(-c->pid, SIGKILL);
        while ((r = waitpid(c->pid, &status, 0)) < 0 && errno == EINTR)
            ;
    }
    c->exited = 1;
    c->ops.on_exit(c->arg, r == c->pid ? status : -1);
    return NULL;
}

static void *errreader_main(void *arg)
{
    pthread_setname_np(pthread_self(), "mcpd-child-err");
    struct child *c = arg;
    char line[STDERR_LINE_MAX];
    size_t len = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(c->err_fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
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
    return NULL;
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
    fcntl(c->in_fd, F_SETFL, fcntl(c->in_fd, F_GETFL) | O_NONBLOCK);
    c->ops = *ops;
    c->arg = arg;
    c->max_message = spec->max_message;
    pthread_mutex_init(&c->write_mu, NULL);
    c->refs = 1;
    if (pthread_create(&c->reader, NULL, reader_main, c) != 0) {
        kill(-c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        *err = strdup("cannot start the upstream reader thread");
        close(c->in_fd);
        close(c->out_fd);
        close(c->err_fd);
        pthread_mutex_destroy(&c->write_mu);
        free(c);
        return NULL;
    }
    if (pthread_create(&c->errreader, NULL, errreader_main, c) != 0)
        c->errreader = 0;
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

int child_send(struct child *c, const char *msg, size_t len)
{
    struct iovec iov[2] = {{(void *)msg, len}, {"\n", 1}};
    size_t left = len + 1;
    int rc = 0;
    pthread_mutex_lock(&c->write_mu);
    int64_t deadline = clock_mono_ms() + WRITE_TIMEOUT_MS;
    while (left > 0 && !c->exited) {
        ssize_t n = writev(c->in_fd, iov[0].iov_len ? iov : iov + 1, iov[0].iov_len ? 2 : 1);
        if (n < 0 && errno == EAGAIN) {
            int64_t wait = deadline - clock_mono_ms();
            struct pollfd p = {.fd = c->in_fd, .events = POLLOUT};
            if (wait <= 0 || poll(&p, 1, (int)wait) <= 0) {
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
    pthread_mutex_unlock(&c->write_mu);
    return rc;
}

/* child_stop's work: it blocks the calling thread for up to the grace
 * period, and then until the child's threads have ended. */
static void stop_blocking(struct child *c, int64_t grace_ms)
{
    /* Closing stdin is the polite stop for a stdio server; SIGTERM to its
     * group follows, then SIGKILL if it is still there after the grace. */
    pthread_mutex_lock(&c->write_mu);
    close(c->in_fd);
    c->in_fd = -1;
    pthread_mutex_unlock(&c->write_mu);
    if (!c->exited)
        kill(-c->pid, SIGTERM);
    int64_t deadline = clock_mono_ms() + grace_ms;
    while (!c->exited && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (!c->exited)
        kill(-c->pid, SIGKILL);
    pthread_join(c->reader, NULL);
    if (c->errreader)
        pthread_join(c->errreader, NULL);
    close(c->out_fd);
    close(c->err_fd);
    child_release(c);
}

/* A stop run for a fiber, on a thread of its own. */
struct stopper {
    struct child *c;
    int64_t grace_ms;
    struct fiber *waiter;
    int done; /* written under the waiter's lock (fiber_wake_set) */
};

static void *stopper_main(void *arg)
{
    struct stopper *s = arg;
    pthread_setname_np(pthread_self(), "mcpd-child-stop");
    stop_blocking(s->c, s->grace_ms);
    fiber_wake_set(s->waiter, &s->done); /* s is the waiter's again from here */
    return NULL;
}

void child_stop(struct child *c, int64_t grace_ms)
{
    if (!c)
        return;
    /* On a fiber (an HTTP request: a DELETE, a stateless request's end)
     * the wait must not hold the pool thread. Another request's fiber
     * parked on that thread may hold what the child's reader thread needs
     * before it can end: a stream's append lock, which an SSE reply's
     * priming write holds across the store commit it parks for, while the
     * reader fails or answers that request. Joining the reader there waited
     * for ever, and every connection of the thread with it (the DELETE
     * too). So the stop runs on a thread of its own while the fiber
     * parks. */
    struct fiber *f = fiber_current();
    struct stopper s = {c, grace_ms, f, 0};
    pthread_t t;
    pthread_attr_t attr;
    if (f && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int started = pthread_create(&t, &attr, stopper_main, &s) == 0;
        pthread_attr_destroy(&attr);
        if (started) {
            /* A cancelled fiber (its connection is going away) cannot
             * park; it polls, as a store commit's waiter does. */
            int r;
            while ((r = fiber_park(&s.done, -1)) != 1)
                if (r == ECANCELED)
                    nanosleep(&(struct timespec){0, 1000000}, NULL);
            return;
        }
    }
    stop_blocking(c, grace_ms);
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
    pthread_mutex_destroy(&c->write_mu);
    free(c);
}
