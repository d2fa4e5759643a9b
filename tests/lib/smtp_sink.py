#!/usr/bin/python3
# smtp_sink.py PORT DIR [FAIL_FIRST] — an SMTP sink for tests (Debian's
# python3-aiosmtpd; run it with /usr/bin/python3).  Every message accepted
# lands in DIR as NNNN.eml (the bytes as received) beside NNNN.json (the
# envelope: from, rcpt).  The first FAIL_FIRST messages are refused with a
# temporary error (451), so a test sees the sender retry.  Prints "ready"
# once it listens.
import json
import os
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, d, fail_first):
        self.d, self.fail_left, self.n = d, fail_first, 0

    async def handle_DATA(self, server, session, envelope):
        if self.fail_left > 0:
            self.fail_left -= 1
            return '451 4.3.0 try again later'
        self.n += 1
        base = os.path.join(self.d, '%04d' % self.n)
        data = envelope.original_content or envelope.content
        if isinstance(data, str):
            data = data.encode('utf-8', 'surrogateescape')
        with open(base + '.tmp', 'wb') as f:
            f.write(data)
        with open(base + '.json', 'w') as f:
            json.dump({'from': envelope.mail_from, 'rcpt': envelope.rcpt_tos}, f)
        os.rename(base + '.tmp', base + '.eml')
        return '250 OK'


def main():
    port, d = int(sys.argv[1]), sys.argv[2]
    fail_first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    os.makedirs(d, exist_ok=True)
    c = Controller(Sink(d, fail_first), hostname='127.0.0.1', port=port)
    c.start()
    print('ready', flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        c.stop()


if __name__ == '__main__':
    main()
