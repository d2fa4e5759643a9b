/* test_logscan.c — the failure signatures of a job's log tail. */
#include <string.h>

#include "harness.h"
#include "work/logscan.c"

static char out[256];

static const char *scan(const char *s)
{
	logscan_reason(s, strlen(s), 0, out, sizeof(out));
	return out;
}

TEST(tracebacks)
{
	CHECK_STR(scan("step 1\nTraceback (most recent call last):\n"
	               "  File \"train.py\", line 3, in <module>\n    raise ValueError('x')\n"
	               "ValueError: x\n"),
	          "ValueError: x");
	/* the last of two tracebacks, chained exceptions, CRLF, no final newline */
	CHECK_STR(scan("Traceback (most recent call last):\n  File \"a\"\nKeyError: 'a'\n\n"
	               "During handling of the above exception, another exception occurred:\n\n"
	               "Traceback (most recent call last):\r\n  File \"b\"\r\n"
	               "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"),
	          "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB");
	CHECK_STR(scan("Traceback (most recent call last):\n  File \"c\"\nKeyboardInterrupt\n"),
	          "KeyboardInterrupt");
	/* a traceback cut off before its last line: nothing to quote */
	CHECK_STR(scan("Traceback (most recent call last):\n  File \"c\"\n"), "");
}

TEST(signatures)
{
	CHECK_STR(scan("RuntimeError happened\nxx CUDA out of memory yy\n"), "CUDA out of memory");
	CHECK_STR(scan("rank0: NCCL WARN ...\n[E ProcessGroupNCCL.cpp] Watchdog caught collective "
	               "operation timeout: WorkNCCL(...)\n"),
	          "NCCL timeout");
	CHECK_STR(scan("init\nNCCL error in: ../nccl.cpp:10, unhandled system error\n"),
	          "NCCL error");
	CHECK_STR(scan("go\nSegmentation fault (core dumped)\n"), "segmentation fault");
	CHECK_STR(scan("go\nsh: line 1:    42 Killed    python train.py\n"),
	          "killed (SIGKILL; out of memory?)");
	CHECK_STR(scan("go\nKilled\n"), "killed (SIGKILL; out of memory?)");
	CHECK_STR(scan("all fine\nexit 3\n"), "");
	CHECK_STR(scan(""), "");
	/* CUDA OOM wins over a later segfault message (more specific) */
	CHECK_STR(scan("CUDA out of memory\nSegmentation fault\n"), "CUDA out of memory");
}

TEST(tail_and_bytes)
{
	const char *t = "ror: half a line\nValueError: no traceback header\nok\n";
	/* a tail's first partial line is not read */
	CHECK(logscan_reason(t, strlen(t), 1, out, sizeof(out)) == 0);
	/* control bytes and invalid UTF-8 are made printable; NUL too */
	{
		const char b[] =
		        "Traceback (most recent call last):\n  x\nE\x01rr: \xff\xc3\xa9\x00z\n";
		CHECK(logscan_reason(b, sizeof(b) - 1, 0, out, sizeof(out)) > 0);
		CHECK_STR(out, "E rr: ?\xc3\xa9 z");
	}
	/* a small out: cut on a character boundary */
	{
		char small[5];
		const char *s = "Traceback (most recent call last):\n  x\nE: \xc3\xa9\xc3\xa9\n";
		CHECK(logscan_reason(s, strlen(s), 0, small, sizeof(small)) == 2);
		CHECK_STR(small, "E:");
		CHECK(logscan_reason(s, strlen(s), 0, small, 0) == -1);
	}
	CHECK(logscan_reason(NULL, 0, 0, out, sizeof(out)) == 0);
}

int main(void)
{
	RUN(tracebacks);
	RUN(signatures);
	RUN(tail_and_bytes);
	return harness_done("test_logscan");
}
