// SPDX-License-Identifier: MIT
// shmat(SHM_REMAP) and remap_file_pages() replace the mappings of a range
// inside the kernel's do_mmap() without a userfaultfd unmap list, so the
// uffd monitor gets no event for the mapping they drop. libhmemreg defines
// both: the dynamic linker binds callers to the first definition in its
// search order, which is this one wherever libhmemreg is linked in (or
// preloaded), ahead of libc. The wrapper makes gets wait while the call
// runs and invalidates the range before returning, then calls the next
// definition (libc's, or another interposer's). Not seen: the raw system
// calls, and callers bound to libc before libhmemreg was loaded
// (dlopen RTLD_LOCAL); hmemreg(3) says so.
#include <cstdint>
#include <dlfcn.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mrcache/uffd_monitor.hpp"

namespace {

using hmemreg::mr::UffdMonitor;

uintptr_t page_size()
{
	static const auto p = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
	return p;
}

template <typename Fn>
Fn next_definition(const char *name)
{
	return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

// Holds the monitor's gets for the duration of one replacing call.
class Replacement {
public:
	Replacement() : m_(UffdMonitor::running())
	{
		if (m_)
			m_->hold();
	}
	~Replacement()
	{
		if (m_)
			m_->unhold();
	}
	Replacement(const Replacement &) = delete;
	Replacement &operator=(const Replacement &) = delete;
	void done(uintptr_t start, uintptr_t len)
	{
		if (m_ && len)
			m_->replaced(start, start + len);
	}

private:
	std::shared_ptr<UffdMonitor> m_;
};

} // namespace

extern "C" __attribute__((visibility("default"))) void *shmat(int shmid, const void *addr, int flags)
{
	using Fn = void *(*)(int, const void *, int);
	static const Fn next = next_definition<Fn>("shmat");
	auto call = [&] {
		return next ? next(shmid, addr, flags)
			    : reinterpret_cast<void *>(::syscall(SYS_shmat, shmid, addr, flags));
	};
	// Only SHM_REMAP at a given address replaces anything (without it an
	// occupied range fails with EINVAL).
	if (!addr || !(flags & SHM_REMAP))
		return call();
	auto segment_len = [shmid]() -> uintptr_t {
		shmid_ds ds{};
		if (::shmctl(shmid, IPC_STAT, &ds) != 0)
			return 0;
		return (static_cast<uintptr_t>(ds.shm_segsz) + page_size() - 1) & ~(page_size() - 1);
	};
	uintptr_t len = segment_len();
	Replacement r;
	void *p = call();
	if (p == reinterpret_cast<void *>(-1))
		return p;
	if (!len)
		len = segment_len();
	const auto at = reinterpret_cast<uintptr_t>(p);
	if (len)
		r.done(at, len);
	else
		r.done(at, ~uintptr_t{0} - at); // size unknown (removed meanwhile): everything above
	return p;
}

extern "C" __attribute__((visibility("default"))) int remap_file_pages(void *addr, size_t size, int prot,
									size_t pgoff, int flags)
{
	using Fn = int (*)(void *, size_t, int, size_t, int);
	static const Fn next = next_definition<Fn>("remap_file_pages");
	Replacement r;
	int rc = next ? next(addr, size, prot, pgoff, flags)
		      : static_cast<int>(::syscall(SYS_remap_file_pages, addr, size, prot, pgoff, flags));
	if (rc == 0) {
		const uintptr_t s = reinterpret_cast<uintptr_t>(addr) & ~(page_size() - 1);
		const uintptr_t e = (reinterpret_cast<uintptr_t>(addr) + size + page_size() - 1) & ~(page_size() - 1);
		r.done(s, e - s);
	}
	return rc;
}
