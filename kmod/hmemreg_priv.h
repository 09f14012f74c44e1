/* SPDX-License-Identifier: GPL-2.0 */
/* hmemreg.ko internal declarations, grouped by the file that defines them. */
#ifndef HMEMREG_PRIV_H
#define HMEMREG_PRIV_H

#include <linux/miscdevice.h>
#include <uapi/linux/hmemreg.h>

#define HMEMREG_CAPS	0ULL

/* **** hmemreg_main.c **** */
extern struct miscdevice hmemreg_misc;

#endif /* HMEMREG_PRIV_H */
