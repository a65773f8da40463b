/* SPDX-License-Identifier: MIT */
/*
 * The TCP console's token: made, written to its file, compared.
 *
 * TCP is reachable by anyone who can reach the address (on loopback:
 * every local user), and the peer's uid is not known there, so a TCP
 * client proves itself with a token in its Hello (weft.proto), before
 * the server sends anything.  The token is WEFT_CONSOLE_TOKEN, or one
 * made here from getrandom(2) (128 bits, hex) and written, mode 0600,
 * next to the unix socket in the per-user 0700 directory: whoever can
 * read it could already attach through the unix socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_state_internal.h"

/* 128 bits: guessing it over a network is out of reach. */
#define TOKEN_BYTES 16

/* Return: 0; -EIO (no randomness: no token, so no TCP listener). */
int weft__server_token_make(char *hex, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char raw[TOKEN_BYTES];
	size_t got = 0;

	if (len < 2 * TOKEN_BYTES + 1)
		return -ENAMETOOLONG;
	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++) {
		hex[2 * i] = digits[raw[i] >> 4];
		hex[2 * i + 1] = digits[raw[i] & 15];
	}
	hex[2 * TOKEN_BYTES] = '\0';
	return 0;
}

/*
 * Writes @token and a newline to @path, mode 0600, replacing a file of
 * that name (a dead process's with our pid).  O_NOFOLLOW and O_EXCL
 * after the unlink: the directory is ours and closed to others, but a
 * link planted in it is not written through.
 * Return: 0 or a negative errno.
 */
int weft__server_token_write(const char *path, const char *token)
{
	size_t len = strlen(token);
	int fd, err = 0;

	(void)unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	errno = 0;
	/* The umask can only take bits away; fchmod makes sure of 0600. */
	if (fchmod(fd, 0600) || write(fd, token, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1)
		err = errno ? -errno : -EIO;
	if (close(fd) && !err)
		err = -errno;
	if (err)
		(void)unlink(path);
	return err;
}

/*
 * Whether @got (@got_len bytes, zero-padded to WEFT_WIRE_TOKEN_MAX + 1)
 * is @want (as long, zero-padded).  Constant time: every byte of both is
 * read and the differences are or-ed together, so how long the
 * comparison takes says nothing of how much of a guess was right.
 */
bool weft__server_token_equal(const char *want, const char *got, size_t got_len)
{
	unsigned diff = 0;
	size_t want_len = strlen(want);

	for (size_t i = 0; i < WEFT_WIRE_TOKEN_MAX + 1; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)got[i];
	return (diff == 0) & (want_len == got_len) & (want_len > 0);
}

/* Whether @path names something (not followed): its id in @id. */
bool weft__file_id_of(const char *path, weft__file_id_t *id)
{
	struct stat st;

	if (lstat(path, &st))
		return false;
	*id = (weft__file_id_t){ .dev = st.st_dev, .ino = st.st_ino };
	return true;
}

/*
 * Unlinks @path if it still names the socket @id says we bound.  Two
 * servers of one process share a path (the socket and the token are
 * named for the pid): one stopping while the next starts (a runtime
 * destroyed as another is made) must not take the new one's away.  The
 * id is sound while our socket is open (it holds the inode, so the
 * number is not reused): callers check before they close it.  A check
 * then an unlink, not one step: a socket replaced between the two is
 * still lost, a window of two system calls, where without the check it
 * was a server's life.
 */
void weft__unlink_if_same(const char *path, const weft__file_id_t *id)
{
	weft__file_id_t now;

	if (path[0] && weft__file_id_of(path, &now) && now.dev == id->dev &&
	    now.ino == id->ino)
		(void)unlink(path);
}

/*
 * Unlinks the token file @path if it still holds @token, ours: a file's
 * inode number is no proof there (nothing holds the file open, and a
 * file system reuses a freed number at once: ext4 gave the next
 * server's token file the number of ours), 128 random bits are.
 */
void weft__server_token_unlink(const char *path, const char *token)
{
	char got[WEFT_WIRE_TOKEN_MAX + 2];
	size_t len = strlen(token);
	struct stat st;
	ssize_t n;
	int fd;

	if (!path[0] || !len)
		return;
	/* Not through a link, and never blocking on a FIFO put there: a
	 * regular file, or it is not ours. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ?
		    read(fd, got, sizeof(got)) :
		    -1;
	close(fd);
	/* Ours is the token and a newline, as token_write() wrote it. */
	if (n == (ssize_t)len + 1 && got[len] == '\n' &&
	    memcmp(got, token, len) == 0)
		(void)unlink(path);
}
