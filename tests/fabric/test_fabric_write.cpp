// SPDX-License-Identifier: MIT
// Writes over real providers on loopback: contiguous and scattered, bytes
// verified at the target, target notified once per transfer.
#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "harness.hpp"

using namespace fx;

PROVIDER_TEST(write, reports_choice)
{
	Facade e(loopback(prov));
	const Capabilities &c = e.caps();
	cr_assert_eq(c.provider, prov, "chose provider %s, asked %s", c.provider.c_str(), prov.c_str());
	cr_assert(c.rma);
	cr_assert_eq(c.rail_domains.size(), 1u);
	cr_assert(c.queue_depth > 0);
	std::string d = c.describe();
	cr_assert(d.find("provider " + prov) != std::string::npos, "%s", d.c_str());
	cr_assert(d.find("progress:") != std::string::npos, "%s", d.c_str());
}

NOTIFY_TEST(write, contiguous_sizes)
{
	Pair p(prov);
	const size_t sizes[] = {1, 7, 4096, 65537, 1 << 20, 64 << 20};
	Buffer src(64 << 20), dst(64 << 20);
	auto rs = p.a.register_region(src.data(), src.len);
	auto rd = p.b.register_region(dst.data(), dst.len);
	auto desc = p.b.descriptor(*rd);
	uint64_t tag = 100;
	for (size_t n : sizes) {
		fill(src.data(), n, n);
		std::memset(dst.data(), 0, n + 1 <= dst.len ? n + 1 : n);
		Chunk c{rs.get(), 0, n, 0};
		std::atomic<int> cbs{0};
		auto t = p.a.write(p.b_at_a, {&c, 1}, desc, ++tag, [&](const Transfer &) { cbs++; });
		cr_assert(p.a.wait(*t, 60s), "write of %zu bytes did not complete", n);
		cr_assert_eq(t->status(), 0, "write of %zu: %s", n, t->error().c_str());
		cr_assert_eq(cbs.load(), 1);
		cr_assert_eq(t->bytes(), n);
		size_t want = p.in_b.nnotes.load();
		cr_assert(eventually([&] { return p.in_b.nnotes.load() >= want; }));
		cr_assert(eventually([&] {
			std::lock_guard l(p.in_b.mu);
			return !p.in_b.notes.empty() && p.in_b.notes.back().tag == tag;
		}), "target not notified of transfer %zu", n);
		{
			std::lock_guard l(p.in_b.mu);
			const Notification &note = p.in_b.notes.back();
			cr_assert_eq(note.bytes, n);
			cr_assert_eq(note.chunks, 1u);
			cr_assert_eq(note.from, p.a_at_b);
			cr_assert_eq(note.sender, p.a.id());
		}
		cr_assert(check_bytes(dst.data(), n, n), "bytes differ after a %zu B write", n);
		if (n < dst.len)
			cr_assert_eq(dst.data()[n], 0, "wrote past the chunk");
	}
	cr_assert_eq(p.in_b.nnotes.load(), std::size(sizes), "one notification per transfer");
}

// Thousands of chunks of random sizes, written in a shuffled order to
// shuffled non-overlapping destinations.
static void scattered(const std::string &prov, unsigned rails, size_t nchunks, size_t max_chunk, size_t write_iov = 0)
{
	Config ca = loopback(prov), cb = loopback(prov);
	ca.rails = rails;
	ca.write_iov = write_iov;
	cb.rails = rails;
	Pair p(ca, cb);
	std::mt19937_64 rng(nchunks * 31 + rails);
	std::vector<size_t> len(nchunks);
	size_t total = 0;
	for (auto &l : len) {
		l = 1 + rng() % max_chunk;
		total += l;
	}
	Buffer src(total), dst(total);
	fill(src.data(), total, 7);
	auto rs = p.a.register_region(src.data(), total);
	auto rd = p.b.register_region(dst.data(), total);
	// Source chunk i is at src_off[i]; its destination slot is a permutation.
	std::vector<size_t> src_off(nchunks), perm(nchunks), dst_off(nchunks);
	std::exclusive_scan(len.begin(), len.end(), src_off.begin(), size_t(0));
	std::iota(perm.begin(), perm.end(), 0);
	std::shuffle(perm.begin(), perm.end(), rng);
	size_t off = 0;
	for (size_t k = 0; k < nchunks; k++) {
		dst_off[perm[k]] = off;
		off += len[perm[k]];
	}
	std::vector<Chunk> chunks;
	for (size_t i = 0; i < nchunks; i++)
		chunks.push_back({rs.get(), src_off[i], len[i], dst_off[i]});
	std::shuffle(chunks.begin(), chunks.end(), rng);
	auto t = p.a.write(p.b_at_a, chunks, p.b.descriptor(*rd), 9);
	cr_assert(p.a.wait(*t, 60s), "scattered write did not complete");
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == 1; }));
	cr_assert_eq(p.in_b.notes[0].chunks, nchunks);
	cr_assert_eq(p.in_b.notes[0].bytes, total);
	for (size_t i = 0; i < nchunks; i++)
		cr_assert(check_bytes(dst.data() + dst_off[i], 7, len[i], src_off[i]), "chunk %zu misplaced", i);
	auto st = p.a.stats();
	cr_assert_eq(st.size(), rails);
	uint64_t posted = 0;
	for (auto &s : st) {
		cr_assert(s.writes_posted > 0, "a rail carried no writes: not striped");
		posted += s.writes_posted;
	}
	// One piece per chunk, split above the engine's max write (tcp: 512 KiB);
	// with write_iov 1 one write per piece, else up to write_iov pieces of a
	// rail per write.
	// A chunk continuing the previous one on both sides joins it first.
	const size_t mw = p.a.caps().max_write, iov = p.a.caps().write_iov;
	std::vector<size_t> runs;
	for (size_t k = 0; k < chunks.size(); k++) {
		const Chunk &c = chunks[k], *b = k ? &chunks[k - 1] : nullptr;
		if (b && b->local_offset + b->len == c.local_offset && b->remote_offset + b->len == c.remote_offset)
			runs.back() += c.len;
		else
			runs.push_back(c.len);
	}
	uint64_t pieces = 0;
	for (size_t l : runs)
		pieces += l / mw + (l % mw != 0);
	if (iov == 1)
		cr_assert_eq(posted, pieces, "%llu writes for %llu pieces (max write %zu)", (unsigned long long)posted,
			     (unsigned long long)pieces, mw);
	else
		cr_assert(posted <= pieces && posted >= (pieces + iov - 1) / iov && (nchunks < 64 || posted < pieces),
			  "%llu writes for %llu pieces, %zu per write at most", (unsigned long long)posted,
			  (unsigned long long)pieces, iov);
}


NOTIFY_TEST(write, scattered_4096_small_chunks)
{
	scattered(prov, 1, 4096, 4096);
}

PROVIDER_TEST(write, scattered_one_chunk_per_write)
{
	scattered(prov, 1, 1000, 8192, 1);
}

static uint64_t writes_posted(Facade &e)
{
	uint64_t n = 0;
	for (const RailStats &s : e.stats())
		n += s.writes_posted;
	return n;
}

// Pages contiguous on both sides go out as a few large writes; a break on
// either side, or another region, starts a new one. The target still hears
// of every chunk the caller passed.
PROVIDER_TEST(write, contiguous_chunks_join)
{
	Config ca = loopback(prov);
	ca.write_iov = 1; // one write per joined run: the count says what joined
	Pair p(ca, loopback(prov));
	const size_t page = 4096, npages = 256, total = page * npages;
	Buffer src(total), src2(6 * page), dst(total + page);
	fill(src.data(), total, 3);
	fill(src2.data(), src2.len, 9);
	auto rs = p.a.register_region(src.data(), total);
	auto rs2 = p.a.register_region(src2.data(), src2.len);
	auto rd = p.b.register_region(dst.data(), dst.len);
	auto desc = p.b.descriptor(*rd);
	const size_t mw = p.a.caps().max_write;

	std::vector<Chunk> pages;
	for (size_t k = 0; k < npages; k++)
		pages.push_back({rs.get(), k * page, page, k * page});
	uint64_t before = writes_posted(p.a);
	auto t = p.a.write(p.b_at_a, pages, desc, 1);
	cr_assert(p.a.wait(*t, 60s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert_eq(writes_posted(p.a) - before, total / mw + (total % mw != 0), "%llu writes for %zu contiguous pages",
		     (unsigned long long)(writes_posted(p.a) - before), npages);
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == 1; }));
	cr_assert_eq(p.in_b.notes[0].chunks, npages);
	cr_assert(check_bytes(dst.data(), 3, total), "joined pages landed wrong");

	// Five runs, each break alone: pages 0-1 join; page 3 continues them at
	// the target only; page 4 continues page 3 locally only; the other
	// region's page at the same offsets continues page 4 on both sides but
	// is another region; page 2 fills the hole at the target.
	std::memset(dst.data(), 0, dst.len);
	std::vector<Chunk> broken{{rs.get(), 0, page, 0},
				  {rs.get(), page, page, page},
				  {rs.get(), 3 * page, page, 2 * page},
				  {rs.get(), 4 * page, page, 4 * page},
				  {rs2.get(), 5 * page, page, 5 * page},
				  {rs.get(), 2 * page, page, 3 * page}};
	before = writes_posted(p.a);
	t = p.a.write(p.b_at_a, broken, desc, 2);
	cr_assert(p.a.wait(*t, 60s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert_eq(writes_posted(p.a) - before, 5u, "%llu writes for five runs",
		     (unsigned long long)(writes_posted(p.a) - before));
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == 2; }));
	cr_assert_eq(p.in_b.notes[1].chunks, broken.size());
	cr_assert(check_bytes(dst.data(), 3, 2 * page), "pages 0-1");
	cr_assert(check_bytes(dst.data() + 2 * page, 3, page, 3 * page), "page 3 of the source at 2 pages");
	cr_assert(check_bytes(dst.data() + 3 * page, 3, page, 2 * page), "page 2 of the source at 3 pages");
	cr_assert(check_bytes(dst.data() + 4 * page, 3, page, 4 * page), "page 4");
	cr_assert(check_bytes(dst.data() + 5 * page, 9, page, 5 * page), "the other region's page");
}

PROVIDER_TEST(write, scattered_large_chunks)
{
	scattered(prov, 1, 24, 4 << 20);
}

NOTIFY_TEST(write, striped_over_two_rails)
{
	scattered(prov, 2, 2000, 65536);
}

NOTIFY_TEST(write, caller_driven_progress)
{
	Pair p(loopback(prov, 0), loopback(prov, 0));
	Buffer src(1 << 20), dst(1 << 20);
	fill(src.data(), src.len, 3);
	auto rs = p.a.register_region(src.data(), src.len);
	auto rd = p.b.register_region(dst.data(), dst.len);
	Chunk c{rs.get(), 0, src.len, 0};
	auto t = p.a.write(p.b_at_a, {&c, 1}, p.b.descriptor(*rd), 5);
	cr_assert(eventually([&] { return t->status() != -HMEMREG_EAGAIN && p.in_b.nnotes.load() == 1; }, 20s,
			     {&p.a, &p.b}));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(check_bytes(dst.data(), 3, dst.len));
	cr_assert(p.a.caps().progress.find("caller") != std::string::npos);
}

// Hundreds of scattered transfers in flight at once, each into its own slot:
// every one notified exactly once, with its tag, size and chunk count, and
// its bytes in place.
NOTIFY_TEST(write, many_in_flight)
{
	Pair p(prov);
	const size_t n = 300, slot = 64 << 10, nch = 8;
	Buffer src(n * slot), dst(n * slot);
	fill(src.data(), src.len, 41);
	auto rs = p.a.register_region(src.data(), src.len);
	auto rd = p.b.register_region(dst.data(), dst.len);
	auto desc = p.b.descriptor(*rd);
	std::vector<TransferRef> ts;
	for (size_t t = 0; t < n; t++) {
		std::vector<Chunk> ch;
		for (size_t k = 0; k < nch; k++) // reversed within the slot
			ch.push_back({rs.get(), t * slot + k * (slot / nch), slot / nch,
				      t * slot + (nch - 1 - k) * (slot / nch)});
		ts.push_back(p.a.write(p.b_at_a, ch, desc, 1000 + t));
	}
	for (auto &t : ts) {
		cr_assert(p.a.wait(*t, 60s));
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	}
	cr_assert(eventually([&] { return p.in_b.nnotes.load() >= n; }), "%zu of %zu notified",
		  p.in_b.nnotes.load(), n);
	std::this_thread::sleep_for(50ms); // a duplicate would show up now
	std::lock_guard l(p.in_b.mu);
	cr_assert_eq(p.in_b.notes.size(), n, "notifications: %zu for %zu transfers", p.in_b.notes.size(), n);
	std::vector<int> seen(n, 0);
	for (const Notification &note : p.in_b.notes) {
		cr_assert(note.tag >= 1000 && note.tag < 1000 + n, "tag %llu", (unsigned long long)note.tag);
		seen[note.tag - 1000]++;
		cr_assert_eq(note.bytes, slot);
		cr_assert_eq(note.chunks, nch);
		cr_assert_eq(note.from, p.a_at_b);
	}
	for (size_t t = 0; t < n; t++) {
		cr_assert_eq(seen[t], 1, "transfer %zu notified %d times", t, seen[t]);
		for (size_t k = 0; k < nch; k++) {
			size_t len = slot / nch;
			cr_assert(check_bytes(dst.data() + t * slot + (nch - 1 - k) * len, 41, len, t * slot + k * len),
				  "transfer %zu chunk %zu", t, k);
		}
	}
	auto ps = p.b.path_stats();
	if (notify_mode() == Config::Notify::Immediate) {
		cr_assert_eq(ps.immediate_notices, n);
		cr_assert_eq(ps.immediate_pending, 0u);
	} else {
		cr_assert_eq(ps.immediate_notices, 0u);
	}
	cr_assert_eq(ps.immediate_abandoned, 0u);
}

NOTIFY_TEST(write, notify_mode_reported)
{
	Facade e(loopback(prov));
	const bool imm = notify_mode() == Config::Notify::Immediate;
	cr_assert_eq(e.caps().notify_immediate, imm);
	cr_assert(e.caps().cq_data_size >= 8, "%s has %zu B of CQ data", prov.c_str(), e.caps().cq_data_size);
	const size_t key = !imm ? 0 : imm_bytes_mode() == 4 ? 4 : 8;
	cr_assert_eq(e.caps().imm_key_bytes, key);
	std::string d = e.caps().describe();
	cr_assert(d.find(imm ? "immediate data" : "Done message") != std::string::npos, "%s", d.c_str());
	if (imm)
		cr_assert(d.find(key == 4 ? "4-byte keys: writer index assigned by each target" : "8-byte keys") !=
				  std::string::npos,
			  "%s", d.c_str());
}
