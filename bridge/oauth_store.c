/* oauth_store — see oauth_store.h. */
#include "oauth_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/mcp-bridge", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.config/mcp-bridge", home);
    else
        return NULL;
    return strdup(buf);
}

char *oauth_store_path(void)
{
    char *d = dir_path();
    if (!d)
        return NULL;
    size_t n = strlen(d) + 16;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/oauth.json", d);
    free(d);
    return p;
}

static json_t *load_all(const char *path)
{
    json_t *all = json_load_file(path, 0, NULL);
    if (!json_is_object(all)) {
        json_decref(all);
        all = json_object();
    }
    return all;
}

json_t *oauth_store_get(const char *url)
{
    char *path = oauth_store_path();
    if (!path)
        return NULL;
    json_t *all = json_load_file(path, 0, NULL);
    free(path);
    json_t *e = json_is_object(all) ? json_object_get(all, url) : NULL;
    if (json_is_object(e))
        json_incref(e);
    else
        e = NULL;
    json_decref(all);
    return e;
}

int oauth_store_put(const char *url, json_t *entry)
{
    char *dir = dir_path(), *path = oauth_store_path();
    int rc = -1;
    if (!dir || !path) {
        errno = ENOENT;
        goto out;
    }
    /* ~/.config may not exist yet: make it, then ours, private */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        mkdir(parent, 0700);
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        goto out;
    json_t *all = load_all(path);
    if (entry)
        json_object_set(all, url, entry);
    else
        json_object_del(all, url);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        json_decref(all);
        goto out;
    }
    int bad = json_dumpfd(all, fd, JSON_INDENT(2)) != 0;
    bad |= fsync(fd) != 0;
    bad |= close(fd) != 0;
    json_decref(all);
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(dir);
    free(path);
    return rc;
}
