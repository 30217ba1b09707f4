/* wait_models.c -- what a durable commit costs under two HTTP threading models.
 *
 * The experiment behind service/PERFORMANCE.md's "The threading model" and
 * its durable floor. A bare libmicrohttpd server answers every POST with the same
 * small JSON body, in one of eight models:
 *
 *   tpc-bare     a thread per connection, poll(), nothing stored: how mcpd
 *                started libmicrohttpd before the epoll pool.
 *   tpc-commit   the same threads; each request's body and answer go into one
 *                row of a SQLite WAL database, committed before the answer,
 *                by group commit as service/store/store.c does it: a request
 *                queues its row and, when no commit is running, commits the
 *                whole queue itself; otherwise it sleeps on a semaphore until
 *                the running committer, or the writer thread it wakes, has.
 *   pool-bare    libmicrohttpd's epoll mode with a pool of two threads: what
 *                mhd_ceiling.c measures (run.sh's ceiling), and how mcpd
 *                starts libmicrohttpd.
 *   pool-commit  the pool; a request queues its row and suspends its
 *                connection; the writer thread commits the queue and resumes
 *                each connection, whose handler then queues the answer. No
 *                thread sleeps per request.
 *   pool-streams pool-commit, but what a request commits is what mcpd's store
 *                commits for a reply of one message, in mcpd's schema: a
 *                stream's row (WITHOUT ROWID, time-ordered id, indexed by its
 *                session) and its one chunk, with foreign keys on (the stream's
 *                session, the chunk's stream). The schema is mcpd's own: the
 *                store's store_open migrates the database first, so the
 *                tables and indexes are those of migrations/, whatever they
 *                become. The difference from pool-commit
 *                is what mcpd's storage costs beyond one row; the difference
 *                from mcpd is MCP, ulfius and the rest of mcpd.
 *   pool-queued  the pool; a request queues its answer first, then its row,
 *                and suspends its connection in the same call; the writer
 *                commits and resumes, and only then does libmicrohttpd send
 *                the answer: the handler is not entered twice, which is what
 *                mcpd's endpoints (ulfius runs each once and queues its
 *                answer) would need. A failed commit shuts the socket before
 *                resuming, so the client gets a closed connection, never an
 *                uncommitted answer. (A queued response whose body callback
 *                fails instead was about 30% slower: libmicrohttpd then sends
 *                headers and body apart.)
 *   pool-block, pool8-block
 *                the pool (of two threads, of eight), each request waiting
 *                for its commit as in tpc-commit: the pool thread blocks, and
 *                its other connections wait with it. What the pooled model
 *                would cost if the store's commit wait stayed as it is.
 *
 * The database is what mcpd's store sets where it matters here (WAL,
 * synchronous=NORMAL); SQLite's own checkpoints run in the committing thread
 * (mcpd runs them beside it, store/wal.c), the same in both models. The SQL
 * is the benchmark's own: it stands for the store's commit, not for mcpd.
 *
 * Usage: wait_models MODEL PORT DB   (listens on 127.0.0.1; SIGINT/SIGTERM stop it)
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "store.h"

static const char BODY[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\","
    "\"text\":\"hello from wrk\"}]}}";

enum { REQ_BODY_MAX = 2048 };

struct req {
    struct req *next;
    struct MHD_Connection *conn; /* pool-commit: resumed once committed */
    sem_t done;                  /* tpc-commit: posted once committed */
    int queued, rc;
    size_t len;
    char body[REQ_BODY_MAX];
};

static struct {
    int commit, pool;
    int suspend; /* 0: wait for the commit; 1: suspend, answer on resume; 2: answer, suspend */
    int streams; /* pool-streams: mcpd's stream row and chunk instead of one row */
    unsigned long long stream_seq;
    sqlite3 *db;
    sqlite3_stmt *begin, *insert, *end, *row, *chunk;
    pthread_mutex_t qmu, commit_mu;
    pthread_cond_t qcv;
    struct req *head, *tail;
    int stop;
} g = {.qmu = PTHREAD_MUTEX_INITIALIZER,
       .commit_mu = PTHREAD_MUTEX_INITIALIZER,
       .qcv = PTHREAD_COND_INITIALIZER};

static int step(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* pool-queued: the answer queued for conn must not reach the client (its
 * row was not committed): with the socket shut, libmicrohttpd's send fails
 * and it closes the connection. */
static void shut(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL)
        shutdown(ci->connect_fd, SHUT_RDWR);
}

static int insert_row(const struct req *r)
{
    sqlite3_bind_blob(g.insert, 1, r->body, (int)r->len, SQLITE_STATIC);
    sqlite3_bind_text(g.insert, 2, BODY, sizeof BODY - 1, SQLITE_STATIC);
    return step(g.insert);
}

/* A reply's stream, ended with its one message, as mcpd stores it: ids
 * that grow with time (mcpd's are a time prefix and random bits). */
static int insert_stream(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    char id[40];
    int n = snprintf(id, sizeof id, "%013llx%09llx", (unsigned long long)now, ++g.stream_seq);
    sqlite3_bind_text(g.row, 1, id, n, SQLITE_TRANSIENT);
    sqlite3_bind_int64(g.row, 2, now);
    sqlite3_bind_int64(g.row, 3, (long long)g.stream_seq);
    if (step(g.row) != 0)
        return -1;
    sqlite3_bind_text(g.chunk, 1, id, n, SQLITE_TRANSIENT);
    sqlite3_bind_text(g.chunk, 2, BODY, sizeof BODY - 1, SQLITE_STATIC);
    sqlite3_bind_int64(g.chunk, 3, now);
    return step(g.chunk);
}

/* Commits everything queued as one transaction and tells each request.
 * Called with commit_mu held. */
static void commit_queue(void)
{
    pthread_mutex_lock(&g.qmu);
    struct req *batch = g.head, *next;
    g.head = g.tail = NULL;
    pthread_mutex_unlock(&g.qmu);
    if (batch == NULL)
        return;
    int failed = step(g.begin) != 0;
    for (struct req *r = batch; r && !failed; r = r->next)
        failed = g.streams ? insert_stream() : insert_row(r);
    if (!failed)
        failed = step(g.end) != 0;
    if (failed)
        sqlite3_exec(g.db, "ROLLBACK", NULL, NULL, NULL);
    for (struct req *r = batch; r; r = next) {
        next = r->next; /* r may be gone once told */
        r->rc = failed ? -1 : 0;
        if (g.suspend == 2 && failed)
            shut(r->conn);
        if (g.suspend)
            MHD_resume_connection(r->conn);
        else
            sem_post(&r->done);
    }
}

/* Queues r (qmu held); 1 if the queue was empty. */
static int append_locked(struct req *r)
{
    int was_empty = g.tail == NULL;
    r->next = NULL;
    if (g.tail)
        g.tail->next = r;
    else
        g.head = r;
    g.tail = r;
    return was_empty;
}

/* Commits what no request commits itself: in pool-commit, everything; in
 * tpc-commit, rows queued while another commit ran. */
static void *writer_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g.qmu);
        while (g.head == NULL && !g.stop)
            pthread_cond_wait(&g.qcv, &g.qmu);
        int stopping = g.stop && g.head == NULL;
        pthread_mutex_unlock(&g.qmu);
        if (stopping)
            return NULL;
        pthread_mutex_lock(&g.commit_mu);
        commit_queue();
        pthread_mutex_unlock(&g.commit_mu);
    }
}

/* tpc-commit: store.c's submit() for a waited write. */
static int commit_and_wait(struct req *r)
{
    pthread_mutex_lock(&g.qmu);
    if (g.stop) { /* the writer is gone: nobody would commit a late row */
        pthread_mutex_unlock(&g.qmu);
        return -1;
    }
    sem_init(&r->done, 0, 0);
    append_locked(r);
    pthread_mutex_unlock(&g.qmu);
    if (pthread_mutex_trylock(&g.commit_mu) == 0) {
        commit_queue();
        pthread_mutex_unlock(&g.commit_mu);
    }
    pthread_mutex_lock(&g.qmu);
    if (g.head)
        pthread_cond_signal(&g.qcv);
    pthread_mutex_unlock(&g.qmu);
    while (sem_wait(&r->done) != 0)
        ;
    sem_destroy(&r->done);
    return r->rc;
}

static enum MHD_Result answer(struct MHD_Connection *conn, int rc)
{
    static const char FAILED[] = "{\"error\":\"commit failed\"}";
    struct MHD_Response *resp =
        rc == 0
            ? MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT)
            : MHD_create_response_from_buffer(sizeof FAILED - 1, (void *)FAILED,
                                              MHD_RESPMEM_PERSISTENT);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, rc == 0 ? MHD_HTTP_OK : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **state)
{
    struct req *r = *state;
    (void)cls, (void)url, (void)method, (void)version;
    if (r == NULL) { /* headers only: come back for the body */
        if ((r = calloc(1, sizeof *r)) == NULL)
            return MHD_NO;
        *state = r;
        return MHD_YES;
    }
    if (*data_size != 0) { /* a chunk of the body: keep what fits */
        size_t n = *data_size < REQ_BODY_MAX - r->len ? *data_size : REQ_BODY_MAX - r->len;
        memcpy(r->body + r->len, data, n);
        r->len += n;
        *data_size = 0;
        return MHD_YES;
    }
    if (!g.commit)
        return answer(conn, 0);
    if (!g.suspend)
        return answer(conn, commit_and_wait(r));
    if (r->queued) /* resumed: committed */
        return answer(conn, r->rc);
    r->queued = 1;
    r->conn = conn;
    enum MHD_Result ret = MHD_YES;
    if (g.suspend == 2) {
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
        if (resp == NULL)
            return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "application/json");
        ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        if (ret != MHD_YES)
            return ret;
    }
    /* Suspended before the writer can see it (and resume it), and never
     * once the writer has stopped: a connection left suspended would make
     * MHD_stop_daemon abort. */
    pthread_mutex_lock(&g.qmu);
    if (g.stop) {
        pthread_mutex_unlock(&g.qmu);
        if (g.suspend == 2) { /* its answer is queued: it must not go out */
            shut(conn);
            return ret;
        }
        return answer(conn, -1);
    }
    MHD_suspend_connection(conn);
    if (append_locked(r))
        pthread_cond_signal(&g.qcv); /* the writer takes the whole queue */
    pthread_mutex_unlock(&g.qmu);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **state,
                      enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)conn, (void)why;
    free(*state);
    *state = NULL;
}

/* mcpd's schema in the database at path, made by mcpd's store itself. */
static int migrate_like_mcpd(const char *path)
{
    struct store *st;
    char *err = NULL;
    if (store_open(path, &st, &err) != 0) {
        fprintf(stderr, "wait_models: %s: %s\n", path, err ? err : "store_open failed");
        free(err);
        return -1;
    }
    store_close(st);
    return 0;
}

static int open_db(const char *path)
{
    if (g.streams && migrate_like_mcpd(path) != 0)
        return -1;
    if (sqlite3_open(path, &g.db) != SQLITE_OK)
        return -1;
    if (sqlite3_exec(g.db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE IF NOT EXISTS msg(id INTEGER PRIMARY KEY, req BLOB, reply TEXT)",
                     NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    /* pool-streams: the session the replies' streams belong to, in the
     * tables store_open made (migrate_like_mcpd). */
    if (g.streams &&
        (sqlite3_exec(g.db,
                      "PRAGMA foreign_keys=ON;"
                      "INSERT INTO sessions(id, protocol_version, init_params, created_ms, "
                      "last_active_ms) VALUES('0196f1c2d3e4f5a6b7c8d9e0f1a2b3c4', '2025-11-25', "
                      "'{}', 0, 0)",
                      NULL, NULL, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(g.db,
                            "INSERT INTO streams(id, session_id, kind, request_id, state, "
                            "created_ms, ended_ms, owner) VALUES(?1, "
                            "'0196f1c2d3e4f5a6b7c8d9e0f1a2b3c4', 'request', ?3, 'done', ?2, ?2, "
                            "'bench')",
                            -1, &g.row, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(g.db,
                            "INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) "
                            "VALUES(?1, 0, ?2, 1, ?3)",
                            -1, &g.chunk, NULL) != SQLITE_OK))
        return -1;
    return sqlite3_prepare_v2(g.db, "BEGIN", -1, &g.begin, NULL) == SQLITE_OK &&
                   sqlite3_prepare_v2(g.db, "INSERT INTO msg(req, reply) VALUES(?, ?)", -1,
                                      &g.insert, NULL) == SQLITE_OK &&
                   sqlite3_prepare_v2(g.db, "COMMIT", -1, &g.end, NULL) == SQLITE_OK
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    struct MHD_Daemon *d;
    pthread_t writer;
    sigset_t set;
    static const struct {
        const char *name;
        unsigned pool; /* threads in the pool; 0: a thread per connection */
        int commit, suspend;
        int streams; /* commits mcpd's rows for a reply (pool-streams) */
    } models[] = {{"tpc-bare", 0, 0, 0, 0},     {"tpc-commit", 0, 1, 0, 0},
                  {"pool-bare", 2, 0, 0, 0},    {"pool-commit", 2, 1, 1, 0},
                  {"pool-streams", 2, 1, 1, 1}, {"pool-queued", 2, 1, 2, 0},
                  {"pool-block", 2, 1, 0, 0},   {"pool8-block", 8, 1, 0, 0}};
    int sig, port = argc == 4 ? atoi(argv[2]) : 0;
    size_t m = 0;
    while (argc == 4 && m < sizeof models / sizeof models[0] && strcmp(argv[1], models[m].name))
        m++;
    if (port <= 0 || port > 65535 || m == sizeof models / sizeof models[0]) {
        fprintf(stderr,
                "usage: %s MODEL PORT DB (MODEL: tpc-bare, tpc-commit, pool-bare,\n"
                "       pool-commit, pool-streams, pool-queued, pool-block, pool8-block)\n",
                argv[0]);
        return 2;
    }
    g.pool = models[m].pool != 0;
    g.commit = models[m].commit;
    g.suspend = models[m].suspend;
    g.streams = models[m].streams;
    if (g.commit && open_db(argv[3]) != 0) {
        fprintf(stderr, "wait_models: %s: %s\n", argv[3], sqlite3_errmsg(g.db));
        return 1;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((unsigned short)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sigemptyset(&set), sigaddset(&set, SIGINT), sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread inherits the mask */
    if (g.commit && pthread_create(&writer, NULL, writer_main, NULL) != 0)
        return 1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    flags |= g.pool ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                    : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, &addr,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
                         20000u, MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_THREAD_POOL_SIZE,
                         models[m].pool, MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
                         MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "wait_models: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    sigwait(&set, &sig);
    if (g.commit) { /* the writer drains the queue (resuming its connections) first */
        pthread_mutex_lock(&g.qmu);
        g.stop = 1;
        pthread_cond_signal(&g.qcv);
        pthread_mutex_unlock(&g.qmu);
        pthread_join(writer, NULL);
    }
    MHD_stop_daemon(d);
    if (g.commit) {
        sqlite3_finalize(g.begin), sqlite3_finalize(g.insert), sqlite3_finalize(g.end);
        sqlite3_close(g.db);
    }
    return 0;
}
