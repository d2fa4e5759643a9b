/* fuzz_ws.c — libFuzzer target for the websocket frame header parser.
 *
 * Walks the input frame by frame as the terminal does and checks what the
 * parser promises: a header never longer than 14 bytes or than the input,
 * "need more" only while the input is shorter than a header could be, more
 * input never changing a decided answer, control frames short and final,
 * the payload length within max, and that masking twice restores data.
 */
#include "net/ws.c"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	int client = size ? data[0] & 1 : 0;
	uint64_t max = 1 << 20;
	uint8_t copy[64];

	if (size)
		off = 1;
	while (off < size) {
		struct ws_frame f, g;
		int n = ws_parse_header(data + off, size - off, client, max, &f);
		assert(n == -1 || n == -2 || (n >= 2 && n <= 14));
		if (n == -2) {
			assert(size - off < 14);
			break;
		}
		if (n == -1)
			break;
		assert((size_t)n <= size - off);
		assert(f.len <= max);
		if (f.opcode >= WS_CLOSE)
			assert(f.fin && f.len <= 125);
		if (client)
			assert(f.masked);
		/* a decided header stays decided with any prefix of more input */
		assert(ws_parse_header(data + off, (size_t)n, client, max, &g) == n);
		assert(g.len == f.len && g.opcode == f.opcode);
		{
			size_t plen = f.len < size - off - (size_t)n ? (size_t)f.len
			                                             : size - off - (size_t)n;
			size_t k = plen < sizeof(copy) ? plen : sizeof(copy);
			memcpy(copy, data + off + n, k);
			ws_unmask(copy, k, f.mask, 0);
			ws_unmask(copy, k, f.mask, 0);
			assert(memcmp(copy, data + off + n, k) == 0);
			(void)ws_utf8_ok(data + off + n, plen);
			/* a header we would write parses back to the same frame */
			{
				uint8_t h[14];
				size_t hl = ws_header(h, f.opcode, f.fin, f.len);
				int m = ws_parse_header(h, hl, 0, max, &g);
				assert(m == (int)hl && g.len == f.len && g.opcode == f.opcode &&
				       !g.masked);
			}
			if (f.len > size - off - (size_t)n)
				break;
			off += (size_t)n + plen;
		}
	}
	return 0;
}
