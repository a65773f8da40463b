/* SPDX-License-Identifier: MIT */
/*
 * The client side of the probe's socket: where live processes listen.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weft/wire.h"

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
