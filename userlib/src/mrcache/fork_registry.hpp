// SPDX-License-Identifier: MIT
// Every live cache, for the pthread_atfork handlers (see hmemreg/cache.h).
#pragma once

namespace hmemreg::mr {

class Cache;
void fork_registry_add(Cache *c);
void fork_registry_remove(Cache *c);

} // namespace hmemreg::mr
