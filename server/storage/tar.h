/* tar.h — the tar format, written and read one entry at a time.
 *
 * Writing: ustar headers (a PAX record first for a name of 100 bytes or
 * more), for files.c's folder archives and for the single-file archives
 * the Engine API's container archive calls speak.  Reading: one entry's
 * header (picohttpparser shape), enough to take a file out of such an
 * archive.  Pure: no I/O, no allocation.
 */
#ifndef GPUCLOUD_TAR_H
#define GPUCLOUD_TAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TAR_BLOCK 512

/* The 512-byte ustar header of one entry at h.  type: '0' file, '5'
 * folder, '2' symlink (link is its target), 'x' PAX record.  name and link
 * are cut at 99 bytes (tar_put_header keeps a long name whole). */
void tar_header(unsigned char *h, const char *name, char type, uint64_t size, unsigned mode,
                long long uid, long long gid, time_t mtime, const char *link);

/* The headers for name, owned by root: a PAX record first when the name
 * is long.  Needs up to 2048 bytes at out; returns the bytes written, 0
 * when the name is too long even for a PAX record. */
size_t tar_put_header(unsigned char *out, const char *name, char type, uint64_t size, mode_t mode,
                      time_t mtime, const char *link);

/* The bytes one regular file of len bytes takes in an archive: its header
 * and its data padded to a block. */
size_t tar_file_size(size_t len);

/* Appends a whole regular file (header, data, padding) at out, which has
 * room for tar_file_size(len) bytes.  name is shorter than 100 bytes.
 * Returns the bytes written, 0 when the name is too long. */
size_t tar_put_file(unsigned char *out, const char *name, const void *data, size_t len,
                    unsigned mode, long long uid, long long gid, time_t mtime);

/* One entry as read by tar_next. */
struct tar_entry {
	char name[100]; /* the ustar name (prefix/name), NUL-terminated, cut */
	char type;      /* '0' (or NUL) file, '5' folder, '2' symlink, ... */
	unsigned mode;
	long long uid, gid, mtime;
	uint64_t size;   /* the data's length */
	size_t data_off; /* where the data starts, from the buffer's start */
};

/* Reads the entry at buf[0..len): PAX ('x', 'g') and GNU long-name ('L',
 * 'K') records before it are stepped over.  Returns the bytes the entry
 * takes (its records, header, data and padding), 0 at the end of the
 * archive (a zero block, or nothing at all), -1 when it is not a tar
 * header (bad checksum or number), -2 when more bytes are needed. */
long tar_next(const unsigned char *buf, size_t len, struct tar_entry *e);

#endif
