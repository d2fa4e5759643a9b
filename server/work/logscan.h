/* logscan.h — why a job failed, from the tail of its log.
 *
 * A pure parser (bytes in, a short reason out; no allocation, no I/O) that
 * looks for the signatures of the common ways a training program dies: the
 * last line of a Python traceback ("ValueError: bad shape"), CUDA out of
 * memory, an NCCL error or timeout, a segmentation fault, a process killed
 * by a signal (the kernel's OOM killer prints "Killed" through the shell).
 * jobs.c appends what it finds to the reason of a failed job, so "which of
 * my runs failed, and why" is one look at the list.
 */
#ifndef GPUCLOUD_LOGSCAN_H
#define GPUCLOUD_LOGSCAN_H

#include <stddef.h>

/* How many bytes at the end of a log are worth scanning. */
#define LOGSCAN_TAIL (64 * 1024)

/* Scans buf[0..len) (any bytes; a partial first line is skipped when len
 * is a tail) and writes the most specific cause it recognises into out
 * (NUL-terminated, printable ASCII/UTF-8 only, at most outlen - 1 bytes,
 * cut at a character boundary).  The most specific cause: a traceback's
 * last line, else CUDA out of memory, NCCL, segmentation fault, killed.
 * Returns the length written, 0 when nothing is recognised (out is ""),
 * or -1 when outlen is 0. */
long logscan_reason(const char *buf, size_t len, int is_tail, char *out, size_t outlen);

#endif
