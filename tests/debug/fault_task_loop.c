// SPDX-License-Identifier: GPL-2.0
/*
 * fault_task_loop: the module's whole life cycle (export with watch, device
 * memory, importer attach/pin/map/"DMA", unmap firing the watch, events,
 * close) in a loop, in a process flagged for the kernel's fault injection
 * task filter (/proc/self/make-it-fail), so failslab and fail_page_alloc hit
 * the allocations the module makes on its behalf. The flag is set only after
 * every mapping of the process is locked in memory, and nothing in the loop
 * touches a file system, so the failures land in the module's paths and the
 * kernel's own on its behalf, not in loading code from the VM's 9p root.
 *
 *   fault_task_loop ITERATIONS
 *
 * Any step may fail; the verdict is the kernel's (KASAN, kmemleak, lockdep)
 * and the ledger read afterwards. Prints the steps tried and failed, and
 * counts errors other than the ones allocation failure may cause. Exit 0, or
 * 1 on such an error, 2 on a setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "importer/hmemreg_importer.h"

#define PG 4096UL

static long tried, failed, odd;

/* One step: 0 or -errno; counts it, and errors allocation failure cannot cause. */
static int step(int ret, const char *what)
{
	tried++;
	if (!ret)
		return 0;
	failed++;
	switch (-ret) {
	case ENOMEM:
	case EAGAIN:	/* EXPORT_WATCH: the range changed while pinning */
	case ENOENT:	/* an id whose creation failed */
	case ENXIO:	/* access without the map that failed */
	case EBADF:	/* an fd whose creation failed */
	case EMFILE:
	case ENFILE:
	case EFAULT:	/* a pin that could not get its pages */
		break;
	default:
		odd++;
		fprintf(stderr, "fault_task_loop: %s: %s\n", what, strerror(-ret));
	}
	return ret;
}

static int io(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static void once(void)
{
	struct hmemreg_export ex = { .size = sizeof(ex), .provider = HMEMREG_PROVIDER_HOST,
				     .flags = HMEMREG_EXPORT_WRITE | HMEMREG_EXPORT_WATCH,
				     .fd = -1 };
	struct hmemreg_export dx = { .size = sizeof(dx), .provider = HMEMREG_PROVIDER_DEVMEM,
				     .flags = HMEMREG_EXPORT_WRITE, .len = 4 * PG, .fd = -1 };
	struct hmemreg_devmem_alloc da = { .size = sizeof(da), .len = 4 * PG };
	struct hmimp_attach at[2] = { { .flags = 0 }, { .flags = HMIMP_DYNAMIC } };
	struct hmemreg_event ev[4];
	int fd, ifd, i;
	char c = 0;
	char *buf;

	fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (step(fd < 0 ? -errno : 0, "open hmemreg"))
		return;
	ifd = open(HMIMP_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	step(ifd < 0 ? -errno : 0, "open importer");
	buf = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (step(buf == MAP_FAILED ? -errno : 0, "mmap"))
		goto out_fd;
	memset(buf, 0x5a, 8 * PG);

	ex.addr = (uintptr_t)buf;
	ex.len = 4 * PG;
	step(io(fd, HMEMREG_IOC_EXPORT, &ex), "export host");
	if (!step(io(fd, HMEMREG_IOC_DEVMEM_ALLOC, &da), "devmem alloc")) {
		dx.handle = da.handle;
		step(io(fd, HMEMREG_IOC_EXPORT, &dx), "export devmem");
	}
	at[0].fd = ex.fd;
	at[1].fd = dx.fd;
	for (i = 0; i < 2 && ifd >= 0; i++) {
		struct hmimp_op op = { .dir = HMIMP_BIDIRECTIONAL };
		struct hmimp_access a = { .len = 1, .buf = (uintptr_t)&c };

		if (at[i].fd < 0 || step(io(ifd, HMIMP_IOC_ATTACH, &at[i]), "attach"))
			continue;
		op.id = at[i].id;
		a.id = at[i].id;
		if (i == 1)
			step(io(ifd, HMIMP_IOC_PIN, &op), "pin");
		if (!step(io(ifd, HMIMP_IOC_MAP, &op), "map"))
			step(io(ifd, HMIMP_IOC_ACCESS, &a), "access");
	}
	/* Fires the watch: stale export, move_notify from the work item. */
	munmap(buf, 8 * PG);
	(void)read(fd, ev, sizeof(ev));
	if (ifd >= 0)
		close(ifd);
	if (ex.fd >= 0)
		close(ex.fd);
	if (dx.fd >= 0)
		close(dx.fd);
out_fd:
	close(fd);
}

int main(int argc, char **argv)
{
	long i, n = argc > 1 ? atol(argv[1]) : 0;
	int flag;

	if (n <= 0) {
		fprintf(stderr, "usage: %s ITERATIONS\n", argv[0]);
		return 2;
	}
	/* Fault everything in now: no page of this process comes from disk later. */
	if (mlockall(MCL_CURRENT)) {
		perror("fault_task_loop: mlockall");
		return 2;
	}
	flag = open("/proc/self/make-it-fail", O_WRONLY | O_CLOEXEC);
	if (flag < 0 || write(flag, "1", 1) != 1) {
		perror("fault_task_loop: make-it-fail (needs CONFIG_FAULT_INJECTION)");
		return 2;
	}
	for (i = 0; i < n; i++)
		once();
	if (write(flag, "0", 1) != 1)
		perror("fault_task_loop: clearing make-it-fail");
	close(flag);
	printf("fault_task_loop: %ld iterations, %ld steps, %ld failed, %ld unexpected errors\n",
	       n, tried, failed, odd);
	return odd ? 1 : 0;
}
