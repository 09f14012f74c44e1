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

Test(capi, write_notify_send)
{
	struct hmemreg_engine_config cfg;
	hmemreg_engine_config_init(&cfg);
	cfg.provider = "shm";
	hmemreg_engine_t *a, *b;
	cr_assert_eq(hmemreg_engine_create(&cfg, &a), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_create(&cfg, &b), 0, "%s", hmemreg_engine_last_error());
	char text[1024];
	cr_assert(hmemreg_engine_describe(a, text, sizeof(text)) > 0);
	cr_assert(strstr(text, "provider shm"), "%s", text);

	struct seen seen = {0};
	cr_assert_eq(hmemreg_engine_set_callbacks(b, on_notify, on_message, &seen), 0);
	size_t len = 0;
	cr_assert_eq(hmemreg_engine_address(b, NULL, &len), 0);
	cr_assert(len > 0);
	void *addr = malloc(len);
	cr_assert_eq(hmemreg_engine_address(b, addr, &len), 0);
	uint64_t peer;
	cr_assert_eq(hmemreg_engine_add_peer(a, addr, len, 1, &peer), 0, "%s", hmemreg_engine_last_error());

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
	struct hmemreg_engine_path_stats ps;
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
	free(addr);
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
	cfg.provider = "shm";
	hmemreg_engine_t *a, *b;
	cr_assert_eq(hmemreg_engine_create(&cfg, &a), 0, "%s", hmemreg_engine_last_error());
	cr_assert_eq(hmemreg_engine_create(&cfg, &b), 0, "%s", hmemreg_engine_last_error());
	size_t len = 0;
	hmemreg_engine_address(b, NULL, &len);
	void *addr = malloc(len);
	cr_assert_eq(hmemreg_engine_address(b, addr, &len), 0);
	uint64_t peer;
	cr_assert_eq(hmemreg_engine_add_peer(a, addr, len, 1, &peer), 0, "%s", hmemreg_engine_last_error());
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
	free(addr);
}
