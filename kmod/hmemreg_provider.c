// SPDX-License-Identifier: GPL-2.0
/*
 * The provider registry: built-in providers and those of other modules
 * (exported API), found by id for HMEMREG_IOC_EXPORT.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/mutex.h>

#include "hmemreg_priv.h"

static DEFINE_MUTEX(hmemreg_providers_lock);
static LIST_HEAD(hmemreg_providers);
static u32 hmemreg_next_provider_id = HMEMREG_PROVIDER_DYNAMIC;

int hmemreg_provider_register(struct hmemreg_provider *prov)
{
	const struct hmemreg_provider_ops *ops = prov->ops;

	if (!ops || !ops->release)
		return -EINVAL;
	/* Whole-range maps, or per-attachment ones (forwarding providers). */
	if (!(ops->map && ops->unmap) &&
	    !(ops->attach && ops->detach && ops->map_att && ops->unmap_att))
		return -EINVAL;
	mutex_lock(&hmemreg_providers_lock);
	if (!hmemreg_provider_builtin(prov))
		prov->id = hmemreg_next_provider_id++;
	list_add_tail(&prov->node, &hmemreg_providers);
	mutex_unlock(&hmemreg_providers_lock);
	pr_info("provider %s registered as %u\n", prov->name, prov->id);
	return 0;
}
EXPORT_SYMBOL_GPL(hmemreg_provider_register);

/*
 * The caller's module cannot be unloaded while its exports exist (each
 * holds a module reference), so nothing refers to @prov afterwards.
 */
void hmemreg_provider_unregister(struct hmemreg_provider *prov)
{
	mutex_lock(&hmemreg_providers_lock);
	list_del(&prov->node);
	mutex_unlock(&hmemreg_providers_lock);
}
EXPORT_SYMBOL_GPL(hmemreg_provider_unregister);

/**
 * hmemreg_provider_get() - the provider HMEMREG_IOC_EXPORT names
 * @id: HMEMREG_PROVIDER_* or an id assigned at registration
 *
 * Return: the provider, its module referenced (hmemreg_provider_put()), or
 * NULL when no registered provider has that id and a create op.
 */
struct hmemreg_provider *hmemreg_provider_get(u32 id)
{
	struct hmemreg_provider *prov, *found = NULL;

	mutex_lock(&hmemreg_providers_lock);
	list_for_each_entry(prov, &hmemreg_providers, node) {
		if (prov->id == id && prov->ops->create &&
		    try_module_get(prov->owner)) {
			found = prov;
			break;
		}
	}
	mutex_unlock(&hmemreg_providers_lock);
	return found;
}

void hmemreg_provider_put(struct hmemreg_provider *prov)
{
	module_put(prov->owner);
}
