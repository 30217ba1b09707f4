/* oauth_redirect — see oauth_redirect.h. */
#include "oauth_redirect.h"

#include "clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int oauth_redirect_open(struct oauth_redirect *rd)
{
    rd->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rd->fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(rd->fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(rd->fd, 8) < 0 ||
        getsockname(rd->fd, (struct sockaddr *)&a, &len) < 0) {
        close(rd->fd);
        rd->fd = -1;
        return -1;
    }
    rd->port = ntohs(a.sin_port);
    return 0;
}

static void reply(int fd, const char *status, const char *text)
{
    char buf[512];
    int n =
        snprintf(buf, sizeof buf,
                 "HTTP/1.1 %s\r\nContent-Type: text/html; charset=utf-8\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n%s",
                 status, strlen(text), text);
    if (n > 0 && write(fd, buf, (size_t)n) < 0) {
        /* the browser went away: nothing to tell it */
    }
}

char *oauth_redirect_wait(struct oauth_redirect *rd, long timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            return NULL;
        struct pollfd p = {.fd = rd->fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        int c = accept4(rd->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        /* the request line is all we need; bounded read */
        char buf[8192];
        size_t got = 0;
        while (got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
            struct pollfd q = {.fd = c, .events = POLLIN};
            if (poll(&q, 1, 5000) <= 0)
                break;
            ssize_t n = read(c, buf + got, sizeof buf - 1 - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        buf[got] = '\0';
        char *q = NULL;
        if (strncmp(buf, "GET /callback", 13) == 0 && (buf[13] == '?' || buf[13] == ' ')) {
            size_t n = buf[13] == '?' ? strcspn(buf + 14, " \r\n") : 0;
            q = malloc(n + 1);
            if (q) {
                memcpy(q, buf + 14, n);
                q[n] = '\0';
            }
            reply(c, "200 OK",
                  "<!doctype html><title>mcp-bridge</title><p>Signed in: you can close this "
                  "window.</p>");
        } else {
            reply(c, "404 Not Found", "not found");
        }
        close(c);
        if (q)
            return q;
    }
}

void oauth_redirect_close(struct oauth_redirect *rd)
{
    if (rd->fd >= 0)
        close(rd->fd);
    rd->fd = -1;
}
