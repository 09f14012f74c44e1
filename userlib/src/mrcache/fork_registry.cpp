// SPDX-License-Identifier: MIT
// pthread_atfork: purge (optional) and quiesce every cache before fork();
// in the child, caches forget the parent's registrations.
#include <mutex>
#include <pthread.h>
#include <set>

#include "mrcache/cache.hpp"
#include "mrcache/fork_registry.hpp"

namespace hmemreg::mr {

namespace {

std::mutex g_mu;
std::set<Cache *> g_caches;

void prepare()
{
	g_mu.lock();
	for (Cache *c : g_caches)
		c->before_fork();
}

void parent()
{
	for (Cache *c : g_caches)
		c->after_fork_parent();
	g_mu.unlock();
}

void child()
{
	for (Cache *c : g_caches)
		c->after_fork_child();
	g_mu.unlock();
}

} // namespace

void fork_registry_add(Cache *c)
{
	static std::once_flag once;
	std::call_once(once, [] { pthread_atfork(prepare, parent, child); });
	std::lock_guard g(g_mu);
	g_caches.insert(c);
}

void fork_registry_remove(Cache *c)
{
	std::lock_guard g(g_mu);
	g_caches.erase(c);
}

} // namespace hmemreg::mr
