// SPDX-License-Identifier: GPL-2.0
/*
 * Module-local fault injection (Debian's kernel has no FAULT_INJECTION):
 * every fail_every-th pass through a site enabled in fail_sites fails, so
 * the tests can walk every error path on the stock kernel.
 */
#include <linux/atomic.h>
#include <linux/moduleparam.h>

#include "hmemreg_priv.h"

static unsigned int fail_every;
module_param(fail_every, uint, 0600);
MODULE_PARM_DESC(fail_every, "fail every Nth pass through an enabled fault site, 0 = off");

static unsigned int fail_sites = ~0U;
module_param(fail_sites, uint, 0600);
MODULE_PARM_DESC(fail_sites, "mask of HMEMREG_FAIL_* sites fail_every applies to");

static atomic_t fail_count = ATOMIC_INIT(0);

/**
 * hmemreg_should_fail() - fault injection check
 * @site: HMEMREG_FAIL_* bit of the caller
 *
 * Return: true when the caller must fail as if out of memory.
 */
bool hmemreg_should_fail(u32 site)
{
	unsigned int every = READ_ONCE(fail_every);

	if (!every || !(READ_ONCE(fail_sites) & site))
		return false;
	if ((unsigned int)atomic_inc_return(&fail_count) % every)
		return false;
	atomic64_inc(&hmemreg_stats.faults_injected);
	return true;
}
