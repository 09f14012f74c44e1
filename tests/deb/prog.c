/* SPDX-License-Identifier: MIT */
/*
 * The first program of a user of the packages: built with nothing but
 * `pkg-config hmemreg` (dynamic, and static against libhmemreg.a). It says
 * whether it could open the module: "loaded", or why not.
 * Exit status: 0 when the library works (a NULL argument is refused).
 */
#include <hmemreg/hmemreg.h>
#include <stdio.h>

int main(void)
{
	struct hmemreg_kmod_info info;
	int rc = hmemreg_kmod_query(&info);

	printf("libhmemreg %s (%u.%u): kernel module: %s\n", HMEMREG_VERSION_STRING,
	       hmemreg_library_version() >> 16, hmemreg_library_version() & 0xffff,
	       rc ? hmemreg_strerror(rc) : "loaded");
	return hmemreg_kmod_query(NULL) == -HMEMREG_EINVAL ? 0 : 1;
}
