/* mhd_ceiling.c -- the benchmark's HTTP ceiling.
 *
 * A bare libmicrohttpd server that answers every request with the same small
 * JSON body, started the way mcpd starts libmicrohttpd (a pool of epoll
 * threads, one per CPU and at least two; service/transports/http.c).
 * Whatever mcpd does beyond this (parsing, routing, the store, waiting for
 * the commit) shows up as the gap between the two. Request bodies are read
 * and discarded.
 *
 * Usage: mhd_ceiling PORT   (listens on 127.0.0.1; SIGINT/SIGTERM stop it)
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char BODY[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\","
    "\"text\":\"hello from wrk\"}]}}";

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **state)
{
    static int first_call;
    struct MHD_Response *resp;
    enum MHD_Result ret;
    (void)cls, (void)url, (void)method, (void)version, (void)data;
    if (*state == NULL) { /* headers only: come back for the body */
        *state = &first_call;
        return MHD_YES;
    }
    if (*data_size != 0) { /* a chunk of the body: discard it */
        *data_size = 0;
        return MHD_YES;
    }
    resp = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

int main(int argc, char **argv)
{
    struct sockaddr_in addr;
    struct MHD_Daemon *d;
    sigset_t set;
    int sig, port = argc == 2 ? atoi(argv[1]) : 0;
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sigemptyset(&set), sigaddset(&set, SIGINT), sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* MHD threads inherit the mask */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned pool = cpus > 2 ? (unsigned)(cpus > 64 ? 64 : cpus) : 2;
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, handle,
                         NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_CONNECTION_LIMIT, 20000u,
                         MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_THREAD_POOL_SIZE, pool,
                         MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024), MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "mhd_ceiling: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    return 0;
}
