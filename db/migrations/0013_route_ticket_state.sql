-- 0013_route_ticket_state.sql — ticket binding.
-- A route ticket is bound to the browser that asked for it: the route's
-- origin sets a random sign-in state cookie (gc_state) before sending the
-- browser to the API, the ticket is minted with the state's sha256, and the
-- handshake redeems it only alongside that cookie.  An attacker's ticket is
-- useless in a victim's browser (no matching cookie) and a ticket leaked in
-- a URL is useless in any other browser.  Old tickets (60 s) are dropped.
DELETE FROM route_tickets;
ALTER TABLE route_tickets ADD COLUMN state_hash char(64) NOT NULL
    CHECK (state_hash ~ '^[0-9a-f]{64}$');
