// SPDX-License-Identifier: MIT
// Remote descriptors decoded once, looked up by their bytes (engine/remote_regions.hpp).
#include <criterion/criterion.h>

#include "engine/remote_regions.hpp"
#include "fabric/error.hpp"

using namespace hmemreg::engine;

namespace {

std::vector<uint8_t> descriptor(uint64_t engine, uint64_t length)
{
	wire::RegionDescriptor d;
	d.engine_id = engine;
	d.length = length;
	d.rails = {{0x1000, 7}, {0x2000, 8}};
	return wire::encode(d);
}

} // namespace

Test(remote_regions, same_bytes_decode_once)
{
	RemoteRegions rr;
	auto bytes = descriptor(0xabc'0000'0001, 4096);
	auto a = rr.import(bytes);
	auto copy = bytes; // other storage, same bytes
	auto b = rr.import(copy);
	cr_assert_eq(a.get(), b.get(), "the same bytes decoded twice");
	cr_assert_eq(a->engine_id, 0xabc'0000'0001u);
	cr_assert_eq(a->length, 4096u);
	cr_assert_eq(a->rails.size(), 2u);
	cr_assert_eq(a->rails[1].key, 8u);
	auto c = rr.import(descriptor(0xabc'0000'0001, 8192));
	cr_assert_neq(a.get(), c.get());
	cr_assert_eq(c->length, 8192u);
}

Test(remote_regions, malformed_bytes_throw_every_time)
{
	RemoteRegions rr;
	std::vector<uint8_t> junk(40, 0xab);
	for (int i = 0; i < 2; i++) {
		try {
			rr.import(junk);
			cr_assert_fail("junk accepted");
		} catch (const hmemreg::Error &e) {
			cr_assert_eq(e.code(), HMEMREG_EINVAL);
		}
	}
}

Test(remote_regions, bounded)
{
	RemoteRegions rr;
	auto first = rr.import(descriptor(1, 1));
	for (uint64_t i = 2; i < 2 + RemoteRegions::kMaxEntries + 1; i++)
		rr.import(descriptor(1, i));
	// Emptied once full: the first descriptor decodes again (a new object, same contents).
	auto again = rr.import(descriptor(1, 1));
	cr_assert_neq(first.get(), again.get());
	cr_assert_eq(again->length, 1u);
}
