/* ws.c — websocket frame headers, masking and the accept key (RFC 6455).
 *
 * Owns only framing arithmetic; reading, buffering and reassembling
 * fragmented messages is the caller's (terminal.c).
 */
#include "net/ws.h"

#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

int ws_parse_header(const uint8_t *buf, size_t len, int client, uint64_t max, struct ws_frame *f)
{
	size_t need = 2;
	uint64_t n;

	if (len < 2)
		return -2;
	f->fin = (buf[0] & 0x80) != 0;
	f->opcode = buf[0] & 0x0f;
	f->masked = (buf[1] & 0x80) != 0;
	if (buf[0] & 0x70)
		return -1; /* no extension was negotiated */
	switch (f->opcode) {
	case WS_CONT:
	case WS_TEXT:
	case WS_BINARY:
	case WS_CLOSE:
	case WS_PING:
	case WS_PONG: break;
	default: return -1;
	}
	if (client && !f->masked)
		return -1;
	n = buf[1] & 0x7f;
	if (f->opcode >= WS_CLOSE && (!f->fin || n > 125))
		return -1;
	if (n == 126)
		need += 2;
	else if (n == 127)
		need += 8;
	if (f->masked)
		need += 4;
	if (len < need)
		return -2;
	if (n == 126) {
		n = ((uint64_t)buf[2] << 8) | buf[3];
		if (n < 126)
			return -1; /* not the minimal encoding */
	} else if (n == 127) {
		n = 0;
		for (int i = 0; i < 8; i++)
			n = (n << 8) | buf[2 + i];
		if (n >> 63 || n <= 0xffff)
			return -1;
	}
	if (n > max)
		return -1;
	f->len = n;
	if (f->masked)
		memcpy(f->mask, buf + need - 4, 4);
	else
		memset(f->mask, 0, 4);
	return (int)need;
}

void ws_unmask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset)
{
	for (size_t i = 0; i < len; i++)
		data[i] ^= mask[(offset + i) & 3];
}

size_t ws_header(uint8_t *out, int opcode, int fin, uint64_t len)
{
	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

int ws_accept(const char *key, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char md[SHA_DIGEST_LENGTH], raw[32];
	char buf[64 + sizeof(guid)];
	size_t klen = strlen(key);

	/* a key is base64 of 16 bytes: 24 characters ending in "==" */
	if (klen != 24 || key[22] != '=' || key[23] != '=')
		return -1;
	if (EVP_DecodeBlock(raw, (const unsigned char *)key, 24) != 18)
		return -1;
	memcpy(buf, key, klen);
	memcpy(buf + klen, guid, sizeof(guid) - 1);
	SHA1((const unsigned char *)buf, klen + sizeof(guid) - 1, md);
	EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH);
	return 0;
}

int ws_utf8_ok(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		size_t n;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3;
		else
			return 0;
		if (i + n >= len)
			return 0; /* truncated sequence */
		for (size_t k = 1; k <= n; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
		if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0) ||
		    (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90))
			return 0;
		i += n + 1;
	}
	return 1;
}
