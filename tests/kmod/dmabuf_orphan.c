// SPDX-License-Identifier: MIT
// Leaves a DMABUF wrapper whose owner died: a child wraps a devmem export
// and attaches the wrapper (dynamic, pinned, mapped) to the test importer
// through an importer fd this process opened, then exits; this process
// keeps the importer fd, says "ready <child pid> <wrapper export id>", and
// holds it until stdin closes (or 60 s), then exits (the attachment goes).
// For tests/vm.d/16-mr-cache-stat-dmabuf.sh: mr_cache_stat --check names it.
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "importer/hmemreg_importer.h"

static int child(int ifd, int wp)
{
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	struct hmemreg_devmem_alloc a = { .size = sizeof(a), .len = 4 * 4096 };

	if (fd < 0 || ioctl(fd, HMEMREG_IOC_DEVMEM_ALLOC, &a))
		return 2;
	struct hmemreg_export e = { .size = sizeof(e), .provider = HMEMREG_PROVIDER_DEVMEM,
				    .flags = HMEMREG_EXPORT_WRITE, .len = a.len, .handle = a.handle };
	if (ioctl(fd, HMEMREG_IOC_EXPORT, &e))
		return 3;
	struct hmemreg_export w = { .size = sizeof(w), .provider = HMEMREG_PROVIDER_DMABUF,
				    .flags = HMEMREG_EXPORT_WRITE, .len = a.len, .handle = (uint64_t)e.fd };
	if (ioctl(fd, HMEMREG_IOC_EXPORT, &w))
		return 4;
	struct hmimp_attach at = { .fd = w.fd, .flags = HMIMP_DYNAMIC };
	if (ioctl(ifd, HMIMP_IOC_ATTACH, &at))
		return 5;
	struct hmimp_op op = { .id = at.id, .dir = HMIMP_BIDIRECTIONAL };
	if (ioctl(ifd, HMIMP_IOC_PIN, &op) || ioctl(ifd, HMIMP_IOC_MAP, &op))
		return 6;
	uint64_t id = w.export_id;
	return write(wp, &id, sizeof(id)) == sizeof(id) ? 0 : 7;
}

int main(void)
{
	int ifd = open(HMIMP_DEVICE_PATH, O_RDWR | O_CLOEXEC), p[2], st;
	uint64_t id;

	if (ifd < 0 || pipe(p)) {
		perror("dmabuf_orphan: importer");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0)
		_exit(child(ifd, p[1]));
	close(p[1]);
	if (read(p[0], &id, sizeof(id)) != sizeof(id) || waitpid(pid, &st, 0) != pid ||
	    !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "dmabuf_orphan: the child failed\n");
		return 1;
	}
	printf("ready %d %llu\n", pid, (unsigned long long)id);
	fflush(stdout);
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	char c;
	if (poll(&pfd, 1, 60000) == 1)
		(void)!read(0, &c, 1);
	return 0;
}
