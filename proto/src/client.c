/* SPDX-License-Identifier: MIT */
/*
 * The client side of the probe's socket: where live processes listen,
 * connecting to one (a pid, unix:PATH or tcp://HOST:PORT), sending a
 * frame, and walking the sockets of this user's live processes.  The
 * console and weft-trace share it.  Also the one monotonic clock of
 * libweft-wire and its clients, weft_wire_now_ns().
 */
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "weft/wire.h"

uint64_t weft_wire_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int weft_wire_socket_dir(char *buf, size_t len, int create)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n;

	if (x && x[0] == '/')
		n = snprintf(buf, len, "%s/weft", x);
	else
		n = snprintf(buf, len, "/tmp/weft-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (create) {
		if (mkdir(buf, 0700) == 0) {
			/* The umask may have taken bits away; never added. */
			if (chmod(buf, 0700))
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		}
	}
	if (lstat(buf, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

int weft_wire_connect_unix(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* HOST:PORT, [V6]:PORT or :PORT (loopback). */
static int connect_tcp(const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	size_t hl;
	int fd = -ECONNREFUSED;

	if (!colon || !colon[1])
		return -EINVAL;
	hl = (size_t)(colon - hostport);
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, hostport, hl);
	host[hl] = '\0';
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	if (getaddrinfo(host[0] ? host : "127.0.0.1", colon + 1, &hints, &res))
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -errno;
	}
	freeaddrinfo(res);
	return fd;
}

/*
 * A TCP client's first record: a Hello holding the token (the server
 * says nothing until it has one that matches).  Sent even when there is
 * no token, so that the server closes at once rather than after its
 * handshake time.
 */
static int send_token(int fd, const char *token)
{
	Weft__V1__Frame f = WEFT__V1__FRAME__INIT;
	Weft__V1__Hello h = WEFT__V1__HELLO__INIT;

	h.token = (char *)(token ? token : "");
	f.body_case = WEFT__V1__FRAME__BODY_HELLO;
	f.hello = &h;
	return weft_wire_send(fd, &f);
}

int weft_wire_token_read(const char *path, char *buf, size_t len)
{
	char tmp[WEFT_WIRE_TOKEN_MAX + 2];
	FILE *fp = fopen(path, "re");
	size_t n;

	if (!fp)
		return -errno;
	n = fread(tmp, 1, sizeof(tmp) - 1, fp);
	fclose(fp);
	tmp[n] = '\0';
	/* One line: the newline an editor or echo adds is not the token's. */
	n = strcspn(tmp, "\r\n");
	tmp[n] = '\0';
	if (!n || n > WEFT_WIRE_TOKEN_MAX || n >= len)
		return -EINVAL;
	memcpy(buf, tmp, n + 1);
	return 0;
}

int weft_wire_connect(const char *target)
{
	char dir[256], path[300];
	char *end;
	long pid;
	int err;

	if (!strncmp(target, "unix:", 5))
		return weft_wire_connect_unix(target + 5);
	if (!strncmp(target, "tcp://", 6)) {
		int fd = connect_tcp(target + 6);

		if (fd < 0)
			return fd;
		err = send_token(fd, getenv("WEFT_CONSOLE_TOKEN"));
		if (err) {
			close(fd);
			return err;
		}
		return fd;
	}
	pid = strtol(target, &end, 10);
	if (!*target || *end || pid <= 0)
		return -EINVAL;
	err = weft_wire_socket_dir(dir, sizeof(dir), 0);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/%ld.sock", dir, pid);
	return weft_wire_connect_unix(path);
}

const char *weft_wire_connect_why(const char *target, int err, char *buf,
				  size_t len)
{
	char dir[256];
	char *end;
	long pid = strtol(target, &end, 10);

	if (!*target || *end || pid <= 0 ||
	    (err != -ENOENT && err != -ECONNREFUSED)) {
		snprintf(buf, len, "%s", strerror(-err));
		return buf;
	}
	/* EPERM: a process of another user's, there all the same. */
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		snprintf(buf, len, "no process with pid %ld", pid);
	else if (err == -ECONNREFUSED)
		snprintf(buf, len,
			 "its probe socket refuses connections (a process "
			 "gone left it, and pid %ld is another)",
			 pid);
	else
		snprintf(buf, len,
			 "process %ld has no probe socket in %s (not a weft "
			 "program, its probe off, or another user's)",
			 pid,
			 weft_wire_socket_dir(dir, sizeof(dir), 0) ? "?" : dir);
	return buf;
}

int weft_wire_send(int fd, const Weft__V1__Frame *f)
{
	weft_wire_buf_t b = { 0 };
	const uint8_t *p;
	size_t len;
	int err;

	err = weft_wire_record_append(&b, f);
	p = b.data;
	len = err ? 0 : b.len;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	weft_wire_buf_fini(&b);
	return err;
}

int weft_wire_each_socket(int (*fn)(const char *path, void *arg), void *arg)
{
	char dir[256], path[600];
	struct dirent *e;
	DIR *d;
	int err;

	err = weft_wire_socket_dir(dir, sizeof(dir), 0);
	if (err)
		return err;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		char *end;
		long pid;

		if (n < 6 || strcmp(e->d_name + n - 5, ".sock"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		err = fn(path, arg);
		if (err < 0)
			break;
		if (err > 0)
			continue; /* it answered */
		/*
		 * Nobody answered: a socket named for a process that is gone
		 * (it crashed, or was killed) is removed.  The directory is
		 * ours, and nobody can be listening.
		 */
		pid = strtol(e->d_name, &end, 10);
		if (pid > 0 && !strcmp(end, ".sock") && kill((pid_t)pid, 0) &&
		    errno == ESRCH)
			(void)unlink(path);
	}
	closedir(d);
	return err < 0 ? err : 0;
}
