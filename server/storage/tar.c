/* tar.c — the tar format (see tar.h).
 *
 * Owns: the bytes of a header, both ways.  Does not own: walking folders
 * (files.c's producer) nor talking to an engine (the driver).
 */
#include "storage/tar.h"

#include <stdio.h>
#include <string.h>

static void octal(char *dst, size_t width, uint64_t v)
{
	/* width includes the NUL; digits right-aligned, zero-filled */
	dst[width - 1] = '\0';
	for (size_t i = width - 1; i > 0; i--) {
		dst[i - 1] = (char)('0' + (v & 7));
		v >>= 3;
	}
}

void tar_header(unsigned char *h, const char *name, char type, uint64_t size, unsigned mode,
                long long uid, long long gid, time_t mtime, const char *link)
{
	unsigned sum = 0;

	memset(h, 0, TAR_BLOCK);
	snprintf((char *)h, 100, "%s", name);
	octal((char *)h + 100, 8, mode & 07777);
	octal((char *)h + 108, 8, (uint64_t)(uid > 0 ? uid : 0));
	octal((char *)h + 116, 8, (uint64_t)(gid > 0 ? gid : 0));
	octal((char *)h + 124, 12, size);
	octal((char *)h + 136, 12, (uint64_t)(mtime > 0 ? mtime : 0));
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	if (link)
		snprintf((char *)h + 157, 100, "%s", link);
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

size_t tar_put_header(unsigned char *out, const char *name, char type, uint64_t size, mode_t mode,
                      time_t mtime, const char *link)
{
	size_t n = 0, nl = strlen(name);

	if (nl >= 100) {
		char rec[1300];
		int len = (int)nl + 7, total;
		/* "%d path=%s\n": the length counts its own digits */
		for (;;) {
			total = snprintf(NULL, 0, "%d path=%s\n", len, name);
			if (total == len)
				break;
			len = total;
		}
		if (total >= (int)sizeof(rec))
			return 0;
		snprintf(rec, sizeof(rec), "%d path=%s\n", len, name);
		tar_header(out, "PaxHeader", 'x', (uint64_t)total, 0644, 0, 0, mtime, NULL);
		memset(out + TAR_BLOCK, 0, ((size_t)total + 511) / 512 * 512);
		memcpy(out + TAR_BLOCK, rec, (size_t)total);
		n = TAR_BLOCK + ((size_t)total + 511) / 512 * 512;
	}
	tar_header(out + n, name, type, size, mode, 0, 0, mtime, link);
	return n + TAR_BLOCK;
}

size_t tar_file_size(size_t len)
{
	return TAR_BLOCK + (len + 511) / 512 * 512;
}

size_t tar_put_file(unsigned char *out, const char *name, const void *data, size_t len,
                    unsigned mode, long long uid, long long gid, time_t mtime)
{
	size_t pad = (len + 511) / 512 * 512;

	if (strlen(name) >= 100)
		return 0;
	tar_header(out, name, '0', len, mode, uid, gid, mtime, NULL);
	if (len)
		memcpy(out + TAR_BLOCK, data, len);
	memset(out + TAR_BLOCK + len, 0, pad - len);
	return TAR_BLOCK + pad;
}

/* A number field: octal digits, leading spaces and zeros, ended by a NUL
 * or a space.  Base-256 (the high bit) is not accepted.  0 or -1. */
static int number(const unsigned char *p, size_t width, uint64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;

	while (i < width && p[i] == ' ')
		i++;
	for (; i < width && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v << 3 | (uint64_t)(p[i] - '0');
	}
	for (; i < width; i++)
		if (p[i] != ' ' && p[i] != '\0')
			return -1;
	*out = v;
	return 0;
}

static int zero_block(const unsigned char *h)
{
	for (int i = 0; i < TAR_BLOCK; i++)
		if (h[i])
			return 0;
	return 1;
}

/* Checks h's checksum and reads its fields into e.  0 or -1. */
static int parse(const unsigned char *h, struct tar_entry *e)
{
	uint64_t sum, mode, uid, gid, size, mtime;
	unsigned long long have = 0;
	size_t n, p;

	if (number(h + 148, 8, &sum) < 0)
		return -1;
	for (int i = 0; i < TAR_BLOCK; i++)
		have += (i >= 148 && i < 156) ? ' ' : h[i];
	if (have != sum)
		return -1;
	if (number(h + 100, 8, &mode) < 0 || number(h + 108, 8, &uid) < 0 ||
	    number(h + 116, 8, &gid) < 0 || number(h + 124, 12, &size) < 0 ||
	    number(h + 136, 12, &mtime) < 0 || size > ((uint64_t)1 << 40))
		return -1;
	memset(e, 0, sizeof(*e));
	e->type = (char)h[156];
	e->mode = (unsigned)(mode & 07777);
	e->uid = (long long)uid;
	e->gid = (long long)gid;
	e->mtime = (long long)mtime;
	e->size = size;
	/* ustar: prefix (345..500) "/" name (0..100) */
	p = 0;
	if (memcmp(h + 257, "ustar", 5) == 0 && h[345]) {
		for (n = 0; n < 155 && h[345 + n] && p < sizeof(e->name) - 2; n++)
			e->name[p++] = (char)h[345 + n];
		e->name[p++] = '/';
	}
	for (n = 0; n < 100 && h[n] && p < sizeof(e->name) - 1; n++)
		e->name[p++] = (char)h[n];
	e->name[p] = '\0';
	return 0;
}

long tar_next(const unsigned char *buf, size_t len, struct tar_entry *e)
{
	size_t off = 0;

	for (;;) {
		uint64_t whole;

		if (len - off < TAR_BLOCK)
			return off == 0 && len == 0 ? 0 : -2;
		if (zero_block(buf + off))
			return off == 0 ? 0 : -1;
		if (parse(buf + off, e) < 0)
			return -1;
		whole = TAR_BLOCK + (e->size + 511) / 512 * 512;
		if (whole > (uint64_t)(len - off))
			return -2; /* a record's body or the entry's data */
		if (e->type == 'x' || e->type == 'g' || e->type == 'L' || e->type == 'K') {
			off += (size_t)whole;
			continue;
		}
		e->data_off = off + TAR_BLOCK;
		return (long)(off + whole);
	}
}
