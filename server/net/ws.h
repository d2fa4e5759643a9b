/* ws.h — RFC 6455 websocket framing: a frame header parser, masking, frame
 * headers for replies, and the handshake's accept key.
 *
 * Pure functions in the picohttpparser shape: (buf, len) in, bytes consumed
 * or -1 (protocol error) / -2 (need more); no allocation, no I/O.  The
 * terminal (terminal.c) uses them; the proxy's tunnels do not parse frames.
 */
#ifndef GPUCLOUD_WS_H
#define GPUCLOUD_WS_H

#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
	WS_CONT = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xA,
};

struct ws_frame {
	int fin;
	int opcode;
	int masked;
	uint8_t mask[4];
	uint64_t len; /* payload length */
};

/* Parses the header of the frame at buf[0..len).  client: frames from a
 * client must be masked.  max: the largest payload accepted.  Returns the
 * header length (the payload follows; it need not be in buf yet), -2 when
 * more bytes are needed, -1 on a protocol error (reserved bits, unknown
 * opcode, fragmented or long control frame, unmasked client frame, payload
 * over max, non-minimal or 64-bit-overflowing length). */
int ws_parse_header(const uint8_t *buf, size_t len, int client, uint64_t max, struct ws_frame *f);

/* XORs data with mask, data being the payload bytes from offset on. */
void ws_unmask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset);

/* Writes an unmasked (server) frame header for a payload of len bytes into
 * out (at least 10 bytes); returns its length. */
size_t ws_header(uint8_t *out, int opcode, int fin, uint64_t len);

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (base64 of 16 bytes) into
 * out (29 bytes).  Returns 0, or -1 when the key is malformed. */
int ws_accept(const char *key, char out[29]);

/* 1 when s[0..len) is valid UTF-8 (text frames and close reasons). */
int ws_utf8_ok(const uint8_t *s, size_t len);

#endif
