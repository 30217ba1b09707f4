/* sock_bind — see sock_bind.h. */
#include "sock_bind.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sock_bind(const char *flag, const char *host, int port, int type, int *bound_port, char **err)
{
    char service[16], msg[256];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = type};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, service, &hints, &ai);
    if (gai != 0) {
        snprintf(msg, sizeof msg, "%s %s:%d: %s", flag, host, port, gai_strerror(gai));
        *err = strdup(msg);
        return -1;
    }
    int fd = socket(ai->ai_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0 && type == SOCK_STREAM)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        (type == SOCK_STREAM && listen(fd, 1024) != 0)) {
        snprintf(msg, sizeof msg, "%s %s:%d: %s", flag, host, port, strerror(errno));
        *err = strdup(msg);
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *bound_port = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}
