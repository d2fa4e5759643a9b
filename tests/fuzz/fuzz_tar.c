/* fuzz_tar.c — libFuzzer target for the tar entry reader.
 *
 * Walks the input entry by entry as the driver reads an engine's archive
 * and checks what tar.h promises: an entry's data lies inside the bytes it
 * takes, which lie inside the buffer; its name is terminated; any shorter
 * buffer gives -2 (more needed), never another answer; a file written by
 * tar_put_file reads back the same.
 */
#include "storage/tar.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size heap copy so ASan sees any read past the end. */
	unsigned char *buf = malloc(size ? size : 1), *w;
	size_t off = 0;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	while (off < size) {
		struct tar_entry e, f;
		long r = tar_next(buf + off, size - off, &e);
		assert(r >= -2);
		if (r <= 0)
			break;
		assert((size_t)r <= size - off && r % TAR_BLOCK == 0);
		assert(e.data_off >= TAR_BLOCK && e.data_off + e.size <= (size_t)r);
		assert(memchr(e.name, '\0', sizeof(e.name)));
		/* shorter is "more needed" */
		assert(tar_next(buf + off, (size_t)r - 1, &f) == -2);
		assert(tar_next(buf + off, (size_t)r / 2, &f) == (r / 2 ? -2 : 0));
		/* written again, it reads back the same */
		if (strlen(e.name) < 100 && e.size < 65536 &&
		    (w = malloc(tar_file_size((size_t)e.size)))) {
			size_t n = tar_put_file(w, e.name, buf + off + e.data_off, (size_t)e.size,
			                        e.mode, e.uid % 2097152, e.gid % 2097152,
			                        (time_t)(e.mtime % 8589934592LL));
			assert(n == tar_file_size((size_t)e.size));
			assert(tar_next(w, n, &f) == (long)n);
			assert(strcmp(f.name, e.name) == 0 && f.size == e.size && f.mode == e.mode);
			assert(memcmp(w + f.data_off, buf + off + e.data_off, (size_t)e.size) == 0);
			free(w);
		}
		off += (size_t)r;
	}
	free(buf);
	return 0;
}
