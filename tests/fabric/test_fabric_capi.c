/* SPDX-License-Identifier: MIT */
/* The engine's C API end to end on shm: create, exchange blobs, write,
 * notify, send, and its errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include <hmemreg/hmemreg.h>

struct seen {
	int notes, msgs;
	uint64_t tag, bytes;
	char msg[16];
};

static void on_notify(void *arg, uint64_t from, uint64_t tag, uint64_t bytes)
{
	struct seen *s = arg;
	(void)from;
	s->tag = tag;
	s->bytes = bytes;
	__atomic_add_fetch(&s->notes, 1, __ATOMIC_SEQ_CST);
}

static void on_message(void *arg, uint64_t from, const void *data, size_t len)
{
	struct seen *s = arg;
	(void)from;
	memcpy(s->msg, data, len < sizeof(s->msg) ? len : sizeof(s->msg));
	__atomic_add_fetch(&s->msgs, 1, __ATOMIC_SEQ_CST);
}

static void on_done(void *arg, int status)
{
	*(int *)arg = status == 0 ? 1 : status;
}

/* Two engines on shm, made with cfg (provider set to shm here). */
static void shm_engines(struct hmemreg_engine_config *cfg, hmemreg_engine_t **a, hmemreg_engine_t **b)
{
	cfg->provider = "shm";
	cr_assert_eq(hmemreg_engine_create(cfg, a), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_create(cfg, b), 0, "%s", hmemreg_engine_last_error());
}

/* b added as a peer of a: its id at a. */
static uint64_t add_peer(hmemreg_engine_t *a, hmemreg_engine_t *b)
{
	size_t len = 0;
	cr_assert_eq(hmemreg_engine_address(b, NULL, &len), 0);
	cr_assert(len > 0);
	void *addr = malloc(len);
	cr_assert_eq(hmemreg_engine_address(b, addr, &len), 0);
	uint64_t peer;
	cr_assert_eq(hmemreg_engine_add_peer(a, addr, len, 1, &peer), 0, "%s", hmemreg_engine_last_error());
	free(addr);
	return peer;
}

Test(capi, write_notify_send)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	hmemreg_engine_t *a, *b;
	shm_engines(&cfg, &a, &b);
	char text[1024];
	cr_assert(hmemreg_engine_describe(a, text, sizeof(text)) > 0);
	cr_assert(strstr(text, "provider shm"), "%s", text);

	struct seen seen = {0};
	cr_assert_eq(hmemreg_engine_set_callbacks(b, on_notify, on_message, &seen), 0);
	const uint64_t peer = add_peer(a, b);

	enum { N = 1 << 20 };
	char *src = malloc(N), *dst = calloc(1, N);
	for (int i = 0; i < N; i++)
		src[i] = (char)(i * 7);
	hmemreg_region_t *rs, *rd;
	cr_assert_eq(hmemreg_engine_reg(a, src, N, &rs), 0);
	cr_assert_eq(hmemreg_engine_reg(b, dst, N, &rd), 0);
	size_t dlen = 256;
	char desc[256];
	cr_assert_eq(hmemreg_region_descriptor(rd, desc, &dlen), 0);

	struct hmemreg_chunk ch[2] = {{rs, 0, N / 2, N / 2}, {rs, N / 2, N / 2, 0}};
	int done = 0;
	hmemreg_xfer_t *x;
	cr_assert_eq(hmemreg_engine_write(a, peer, ch, 2, desc, dlen, 77, on_done, &done, &x), 0, "%s",
		     hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(done, 1);
	cr_assert_eq(memcmp(dst, src + N / 2, N / 2), 0);
	cr_assert_eq(memcmp(dst + N / 2, src, N / 2), 0);
	for (int i = 0; i < 2000 && __atomic_load_n(&seen.notes, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	cr_assert_eq(seen.notes, 1);
	cr_assert_eq(seen.tag, 77);
	cr_assert_eq(seen.bytes, N);
	hmemreg_xfer_release(x);
	struct hmemreg_engine_path_stats ps = {.size = sizeof(ps)};
	cr_assert_eq(hmemreg_engine_path_stats(a, &ps), 0);
	cr_assert_eq(ps.direct_writes, 1, "host memory moves directly");
	cr_assert_eq(ps.staged_writes, 0);
	cr_assert_eq(hmemreg_engine_path_stats(a, NULL), -HMEMREG_EINVAL);

	cr_assert_eq(hmemreg_engine_send(a, peer, "hello", 6, NULL, NULL, &x), 0);
	cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0);
	hmemreg_xfer_release(x);
	for (int i = 0; i < 2000 && __atomic_load_n(&seen.msgs, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	cr_assert_str_eq(seen.msg, "hello");

	/* Errors: codes and a message, nothing crashes. */
	cr_assert_eq(hmemreg_engine_write(a, 4242, ch, 2, desc, dlen, 0, NULL, NULL, NULL), -HMEMREG_ENOENT);
	cr_assert(strstr(hmemreg_engine_last_error(), "unknown peer"));
	cr_assert_eq(hmemreg_engine_write(a, peer, ch, 0, desc, dlen, 0, NULL, NULL, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_engine_write(a, peer, NULL, 1, desc, dlen, 0, NULL, NULL, NULL), -HMEMREG_EINVAL);
	struct hmemreg_chunk wrong = {rd, 0, 1, 0}; /* b's region used on a */
	cr_assert_eq(hmemreg_engine_write(a, peer, &wrong, 1, desc, dlen, 0, NULL, NULL, NULL), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_engine_last_error(), "another engine"));
	size_t small = 3;
	cr_assert_eq(hmemreg_region_descriptor(rd, desc, &small), -HMEMREG_EINVAL);
	cr_assert_eq(small, dlen);
	cr_assert_eq(hmemreg_engine_create(NULL, &a), -HMEMREG_EINVAL);

	cr_assert_eq(hmemreg_engine_remove_peer(a, peer), 0);
	cr_assert_eq(hmemreg_engine_remove_peer(a, peer), -HMEMREG_ENOENT);
	hmemreg_region_release(rs);
	hmemreg_region_release(rd);
	hmemreg_engine_destroy(a);
	hmemreg_engine_destroy(b);
	free(src);
	free(dst);
}

/* notify: auto by default, each mode shows in describe(), bad values refused
 * with a message. */
Test(capi, notify_mode)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	cr_assert_eq(cfg.notify, HMEMREG_NOTIFY_AUTO);
	cfg.provider = "shm";
	cfg.progress_threads = 0;
	static const struct {
		uint32_t mode;
		const char *text;
	} modes[] = {
		{HMEMREG_NOTIFY_AUTO, "immediate data (8-byte keys"},
		{HMEMREG_NOTIFY_IMMEDIATE, "immediate data (8-byte keys"},
		{HMEMREG_NOTIFY_MESSAGE, "Done message after delivery-complete writes (Config::notify is Message)"},
	};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		hmemreg_engine_t *e;
		cfg.notify = modes[i].mode;
		cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
		char text[8192]; /* describe() grows with rails and notes */
		hmemreg_engine_describe(e, text, sizeof(text));
		cr_assert(strstr(text, modes[i].text), "mode %u: %s", modes[i].mode, text);
		hmemreg_engine_destroy(e);
	}
	hmemreg_engine_t *e = NULL;
	cfg.notify = 3;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_engine_last_error(), "notify 3"), "%s", hmemreg_engine_last_error());
	cr_assert_null(e);
}

static int describes(hmemreg_engine_t *e, const char *want)
{
	char text[8192];
	hmemreg_engine_describe(e, text, sizeof(text));
	if (!strstr(text, want))
		cr_log_error("describe() lacks '%s':\n%s", want, text);
	return strstr(text, want) != NULL;
}

/* peer_timeout_ms: 0 is the default (HMEMREG_PEER_TIMEOUT_MS from the
 * environment, else 10 s), HMEMREG_PEER_TIMEOUT_NEVER turns it off,
 * describe() says which is in force and where it came from; a bad value in
 * the environment or the config fails creation naming it. */
Test(capi, peer_timeout)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	cr_assert_eq(cfg.peer_timeout_ms, 0);
	cfg.provider = "shm";
	cfg.progress_threads = 0;
	hmemreg_engine_t *e;
	unsetenv("HMEMREG_PEER_TIMEOUT_MS");
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
	cr_assert(describes(e, "peer timeout (no progress): 10000 ms (default)"));
	hmemreg_engine_destroy(e);

	setenv("HMEMREG_PEER_TIMEOUT_MS", "1234", 1);
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
	cr_assert(describes(e, "peer timeout (no progress): 1234 ms (HMEMREG_PEER_TIMEOUT_MS)"));
	hmemreg_engine_destroy(e);
	setenv("HMEMREG_PEER_TIMEOUT_MS", "0", 1);
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
	cr_assert(describes(e, "peer timeout (no progress): never (HMEMREG_PEER_TIMEOUT_MS)"));
	hmemreg_engine_destroy(e);

	/* The config wins over the environment. */
	cfg.peer_timeout_ms = 250;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
	cr_assert(describes(e, "peer timeout (no progress): 250 ms (config)"));
	hmemreg_engine_destroy(e);
	cfg.peer_timeout_ms = HMEMREG_PEER_TIMEOUT_NEVER;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), 0, "%s", hmemreg_engine_last_error());
	cr_assert(describes(e, "peer timeout (no progress): never (config)"));
	hmemreg_engine_destroy(e);

	static const char *bad[] = {"ten", "-5", "12ms", "86400001", "99999999999999999999"};
	cfg.peer_timeout_ms = 0;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("HMEMREG_PEER_TIMEOUT_MS", bad[i], 1);
		e = NULL;
		cr_assert_eq(hmemreg_engine_create(&cfg, &e), -HMEMREG_EINVAL, "'%s' accepted", bad[i]);
		cr_assert(strstr(hmemreg_engine_last_error(), "HMEMREG_PEER_TIMEOUT_MS"), "%s",
			  hmemreg_engine_last_error());
		cr_assert_null(e);
	}
	unsetenv("HMEMREG_PEER_TIMEOUT_MS");
	cfg.peer_timeout_ms = 86400001;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_engine_last_error(), "peer_timeout_ms"), "%s", hmemreg_engine_last_error());
}

struct drained {
	hmemreg_engine_t *e;
	uint64_t peer;
	int calls, from_callback;
};

static void on_drained_done(void *arg, int status)
{
	struct drained *d = arg;
	(void)status;
	/* From a callback, drain would wait for itself: refused. */
	if (d->calls == 0)
		d->from_callback = hmemreg_engine_drain(d->e, d->peer, 1000);
	usleep(2000); /* a slow callback: drain must wait for it to return */
	__atomic_add_fetch(&d->calls, 1, __ATOMIC_SEQ_CST);
}

/* drain returns once every transfer to the peer completed and its callback
 * returned, so what the callbacks use may go; unknown peers and calls from a
 * callback are refused. */
Test(capi, drain)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	hmemreg_engine_t *a, *b;
	shm_engines(&cfg, &a, &b);
	const uint64_t peer = add_peer(a, b);
	enum { N = 64 << 10, W = 32 };
	char *src = calloc(1, N), *dst = calloc(1, N);
	hmemreg_region_t *rs, *rd;
	cr_assert_eq(hmemreg_engine_reg(a, src, N, &rs), 0);
	cr_assert_eq(hmemreg_engine_reg(b, dst, N, &rd), 0);
	size_t dlen = 256;
	char desc[256];
	cr_assert_eq(hmemreg_region_descriptor(rd, desc, &dlen), 0);
	struct hmemreg_chunk ch = {rs, 0, N, 0};
	struct drained *d = calloc(1, sizeof(*d)); /* freed right after drain: ASan sees a late callback */
	d->e = a;
	d->peer = peer;
	d->from_callback = 1;
	for (int i = 0; i < W; i++)
		cr_assert_eq(hmemreg_engine_write(a, peer, &ch, 1, desc, dlen, i, on_drained_done, d, NULL), 0, "%s",
			     hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_drain(a, peer, 30000), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(__atomic_load_n(&d->calls, __ATOMIC_SEQ_CST), W, "drain returned before every callback did");
	cr_assert_eq(d->from_callback, -HMEMREG_EBUSY, "drain from a callback: %d", d->from_callback);
	free(d);
	cr_assert_eq(hmemreg_engine_drain(a, 4242, 10), -HMEMREG_ENOENT);
	cr_assert_eq(hmemreg_engine_drain(NULL, peer, 10), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_engine_drain(a, peer, 0), 0, "nothing left: at once");
	hmemreg_region_release(rs);
	hmemreg_region_release(rd);
	hmemreg_engine_destroy(a);
	hmemreg_engine_destroy(b);
	free(src);
	free(dst);
}

struct handled {
	int notes, msgs;
	uint64_t sender, tag, bytes, chunks;
	char msg[32];
};

static void on_notification(void *arg, const struct hmemreg_notification *n)
{
	struct handled *h = arg;
	h->sender = n->sender;
	h->tag = n->tag;
	h->bytes = n->bytes;
	h->chunks = n->chunks;
	__atomic_add_fetch(&h->notes, 1, __ATOMIC_SEQ_CST);
}

static void on_gathered(void *arg, const struct hmemreg_message *m)
{
	struct handled *h = arg;
	h->sender = m->sender;
	memcpy(h->msg, m->data, m->len < sizeof(h->msg) - 1 ? m->len : sizeof(h->msg) - 1);
	__atomic_add_fetch(&h->msgs, 1, __ATOMIC_SEQ_CST);
}

struct failed {
	int failed, without_reason;
	char why[128];
};

static void on_failed(void *arg, int status)
{
	/* A failed transfer's callback finds why on its thread. */
	struct failed *f = arg;
	if (status < 0) {
		f->failed++;
		if (!*hmemreg_engine_last_error())
			f->without_reason++;
		strncpy(f->why, hmemreg_engine_last_error(), sizeof(f->why) - 1);
	}
}

/* What an outside collective library needs beyond writes: the engine's
 * info and texts, the engine id in an address, region info, handlers with
 * the sender's id, gathered sends, immediate_to, and the config's size
 * rule. */
Test(capi, info_handlers_sendv)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	cr_assert_eq(cfg.size, sizeof(cfg));
	hmemreg_engine_t *a, *b;
	shm_engines(&cfg, &a, &b);
	struct hmemreg_engine_info ia = {.size = sizeof(ia)}, ib = {.size = sizeof(ib)};
	cr_assert_eq(hmemreg_engine_get_info(a, &ia), 0);
	cr_assert_eq(hmemreg_engine_get_info(b, &ib), 0);
	cr_assert_eq(ia.rails, 1);
	cr_assert(ia.id && ia.id != ib.id);
	cr_assert(ia.flags & HMEMREG_ENGINE_HAS_RMA);
	cr_assert(ia.queue_depth > 0 && ia.write_iov >= 1);
	struct hmemreg_engine_info tiny = {.size = 4};
	cr_assert_eq(hmemreg_engine_get_info(a, &tiny), -HMEMREG_EINVAL);
	char text[256];
	cr_assert_eq(hmemreg_engine_text(a, HMEMREG_ENGINE_TEXT_PROVIDER, 0, text, sizeof(text)), 3);
	cr_assert_str_eq(text, "shm");
	cr_assert(hmemreg_engine_text(a, HMEMREG_ENGINE_TEXT_RAIL_DOMAIN, 0, NULL, 0) > 0);
	cr_assert_eq(hmemreg_engine_text(a, HMEMREG_ENGINE_TEXT_RAIL_DOMAIN, 1, text, sizeof(text)), -HMEMREG_ENOENT);
	cr_assert_eq(hmemreg_engine_text(a, 999, 0, text, sizeof(text)), -HMEMREG_EINVAL);
	cr_assert(hmemreg_engine_text(a, HMEMREG_ENGINE_TEXT_NOTIFY, 0, text, sizeof(text)) > 0);
	cr_assert(strstr(text, "immediate"), "%s", text);

	struct handled h = {0};
	cr_assert_eq(hmemreg_engine_set_handlers(b, on_notification, on_gathered, &h), 0);
	size_t len = 0;
	hmemreg_engine_address(b, NULL, &len);
	void *addr = malloc(len);
	cr_assert_eq(hmemreg_engine_address(b, addr, &len), 0);
	uint64_t id = 0;
	cr_assert_eq(hmemreg_peer_engine_id(addr, len, &id), 0);
	cr_assert_eq(id, ib.id);
	cr_assert_eq(hmemreg_peer_engine_id(addr, 3, &id), -HMEMREG_EINVAL);
	uint64_t peer;
	cr_assert_eq(hmemreg_engine_add_peer(a, addr, len, 1, &peer), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_immediate_to(a, peer), 1, "shm has 8 bytes of remote CQ data");
	cr_assert_eq(hmemreg_engine_immediate_to(a, peer + 99), -HMEMREG_ENOENT);

	enum { N = 256 << 10 };
	char *src = malloc(N), *dst = calloc(1, N);
	memset(src, 0x5a, N);
	hmemreg_region_t *rs, *rd;
	cr_assert_eq(hmemreg_engine_reg(a, src, N, &rs), 0);
	cr_assert_eq(hmemreg_engine_reg(b, dst, N, &rd), 0);
	struct hmemreg_region_info ri = {.size = sizeof(ri)};
	cr_assert_eq(hmemreg_region_get_info(rs, &ri), 0);
	cr_assert_eq(ri.iface, HMEMREG_IFACE_HOST);
	cr_assert_eq(ri.device, -1);
	cr_assert_eq(ri.flags & HMEMREG_REGION_STAGED, 0);
	cr_assert(ri.addr == src && ri.length == N);
	size_t dlen = 256;
	char desc[256];
	cr_assert_eq(hmemreg_region_descriptor(rd, desc, &dlen), 0);
	struct hmemreg_chunk ch[3] = {{rs, 0, 1000, 5000}, {rs, 1000, 1000, 0}, {rs, 2000, 3000, 2000}};
	hmemreg_xfer_t *x;
	cr_assert_eq(hmemreg_engine_write(a, peer, ch, 3, desc, dlen, 1234, NULL, NULL, &x), 0);
	cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0, "%s", hmemreg_engine_last_error());
	hmemreg_xfer_release(x);
	for (int i = 0; i < 5000 && __atomic_load_n(&h.notes, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	cr_assert_eq(h.notes, 1);
	cr_assert_eq(h.sender, ia.id, "the notification names the writer engine");
	cr_assert_eq(h.tag, 1234);
	cr_assert_eq(h.bytes, 5000);
	cr_assert_eq(h.chunks, 3);

	struct hmemreg_iov iov[3] = {{"gath", 4}, {"ered ", 5}, {"send", 5}};
	cr_assert_eq(hmemreg_engine_sendv(a, peer, iov, 3, NULL, NULL, &x), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0);
	hmemreg_xfer_release(x);
	for (int i = 0; i < 5000 && __atomic_load_n(&h.msgs, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(1000);
	cr_assert_str_eq(h.msg, "gathered send");
	cr_assert_eq(h.sender, ia.id);
	struct hmemreg_iov nul = {NULL, 3};
	cr_assert_eq(hmemreg_engine_sendv(a, peer, &nul, 1, NULL, NULL, NULL), -HMEMREG_EINVAL);

	/* Transmit-complete: done once it left, and it still arrives whole. */
	int msgs = __atomic_load_n(&h.msgs, __ATOMIC_SEQ_CST);
	struct hmemreg_iov tc[2] = {{"transmit ", 9}, {"complete", 9}};
	cr_assert_eq(hmemreg_engine_sendv_flags(a, peer, tc, 2, HMEMREG_SEND_TRANSMIT_COMPLETE, NULL, NULL, &x), 0, "%s",
		     hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0);
	hmemreg_xfer_release(x);
	for (int i = 0; i < 5000 && __atomic_load_n(&h.msgs, __ATOMIC_SEQ_CST) == msgs; i++)
		usleep(1000);
	cr_assert_str_eq(h.msg, "transmit complete");
	/* Borrowed tail: sent from the caller's memory, which stays untouched
	 * until the completion; the message arrives whole (head copied, tail
	 * in place, or both copied into a bundle), three pieces or two. */
	char tail[] = "borrowed tail";
	struct hmemreg_iov bw[3] = {{"a ", 2}, {"mostly ", 7}, {tail, sizeof(tail)}};
	for (size_t n = 3; n >= 2; n--) {
		msgs = __atomic_load_n(&h.msgs, __ATOMIC_SEQ_CST);
		struct hmemreg_iov *piece = n == 3 ? bw : bw + 1;
		cr_assert_eq(hmemreg_engine_sendv_flags(a, peer, piece, n,
							HMEMREG_SEND_TRANSMIT_COMPLETE | HMEMREG_SEND_BORROW, NULL, NULL,
							&x),
			     0, "%s", hmemreg_engine_last_error());
		cr_assert_eq(hmemreg_xfer_wait(a, x, 20000), 0);
		hmemreg_xfer_release(x);
		for (int i = 0; i < 5000 && __atomic_load_n(&h.msgs, __ATOMIC_SEQ_CST) == msgs; i++)
			usleep(1000);
		cr_assert_str_eq(h.msg, n == 3 ? "a mostly borrowed tail" : "mostly borrowed tail");
	}
	/* A flag it does not know: refused, named, nothing sent. */
	cr_assert_eq(hmemreg_engine_sendv_flags(a, peer, tc, 2, 1u << 5, NULL, NULL, NULL), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_engine_last_error(), "unknown send flags 32"), "%s", hmemreg_engine_last_error());

	/* A failed write's callback says why: an engine without progress
	 * threads and room for one operation in flight, its other writes
	 * queued, fails them when the peer is removed. */
	struct hmemreg_engine_config still = cfg;
	still.progress_threads = 0;
	still.queue_depth = 1;
	still.peer_queue_depth = 1;
	hmemreg_engine_t *c;
	cr_assert_eq(hmemreg_engine_create(&still, &c), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_add_peer(c, addr, len, 0, &peer), 0, "%s", hmemreg_engine_last_error());
	hmemreg_region_t *rc_src;
	cr_assert_eq(hmemreg_engine_reg(c, src, N, &rc_src), 0);
	struct hmemreg_chunk one = {rc_src, 0, 1000, 0};
	struct failed f = {0};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(hmemreg_engine_write(c, peer, &one, 1, desc, dlen, 1, on_failed, &f, NULL), 0, "%s",
			     hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_remove_peer(c, peer), 0);
	hmemreg_region_release(rc_src);
	hmemreg_engine_destroy(c);
	cr_assert(f.failed > 0, "no write failed");
	cr_assert_eq(f.without_reason, 0, "%d of %d failed writes' callbacks had no reason", f.without_reason, f.failed);
	cr_log_info("a failed write: %s", f.why);
	hmemreg_region_release(rs);
	hmemreg_region_release(rd);
	hmemreg_engine_destroy(a);
	hmemreg_engine_destroy(b);

	/* The config's size rule. */
	cfg.size = 8;
	hmemreg_engine_t *e = NULL;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_engine_last_error(), "config size 8"), "%s", hmemreg_engine_last_error());
	cfg.size = sizeof(cfg);
	cfg.flags = 1u << 30;
	cr_assert_eq(hmemreg_engine_create(&cfg, &e), -HMEMREG_EINVAL);
	cr_assert_null(e);
	free(src);
	free(dst);
	free(addr);
}
