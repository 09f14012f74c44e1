/* SPDX-License-Identifier: MIT */
/*
 * The file HMEMREG_NCCL_TIMELINE=DIR has each process of hmemreg's NCCL
 * plugin write (DIR/timeline.PID.txt), and hmemreg_bench timeline reads:
 * one line per step of a request,
 *
 *   NS STEP ENGINE COMM SEQ BYTES
 *
 * NS: CLOCK_MONOTONIC nanoseconds; STEP: below; ENGINE (hex), COMM, SEQ:
 * the message, named the same on both sides (the sending engine's id, its
 * send comm's id, the sequence number on that connection); BYTES: the
 * send's size or the receive's capacity or landed size.
 */
#ifndef HMEMREG_NCCL_TIMELINE_H
#define HMEMREG_NCCL_TIMELINE_H

enum hmemreg_nccl_step {
	HMEMREG_STEP_SEND_WAITS = 1,     /* isend found no advertisement (first time for that send) */
	HMEMREG_STEP_CTS_SEEN = 2,       /* the receive's advertisement reached the sender */
	HMEMREG_STEP_WRITE_POSTED = 3,   /* isend posted the write into the advertised buffer */
	HMEMREG_STEP_INLINE_POSTED = 4,  /* isend sent the data in a control message */
	HMEMREG_STEP_EAGER_POSTED = 5,   /* isend wrote into an eager slot */
	HMEMREG_STEP_SEND_CALLBACK = 7,  /* the engine completed the send */
	HMEMREG_STEP_SEND_DONE = 8,      /* test() said done */
	HMEMREG_STEP_RECV_POSTED = 10,   /* irecv */
	HMEMREG_STEP_ADVERTISED = 11,    /* its advertisement went to the sender */
	HMEMREG_STEP_DATA_LANDED = 12,   /* the write's (or eager write's) notification */
	HMEMREG_STEP_RECV_DONE = 13,     /* test() said done */
	HMEMREG_STEP_INLINE_LANDED = 14, /* Inline data reached the receiver */
	HMEMREG_STEP_COUNT = 15
};

#endif
