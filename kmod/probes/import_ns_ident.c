// SPDX-License-Identifier: GPL-2.0
/*
 * MODULE_IMPORT_NS() took a bare identifier until cdd30ebb1b9f (6.13) made
 * it take a string literal; a bare identifier no longer compiles there.
 */
#include <linux/module.h>

MODULE_IMPORT_NS(DMA_BUF);
MODULE_LICENSE("GPL");
