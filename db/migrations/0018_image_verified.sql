-- 0018_image_verified.sql — whether a catalog image's reference is known to
-- exist.  POST /images checks it against the registry; an admin may add an
-- image without that check (verify: false, e.g. a registry gpucloudd cannot
-- reach), and then it stays hidden from everyone but admins until a pull of
-- it has succeeded on some node (images.c sets it).  Images already in the
-- catalog were pulled or are in use: they count as verified.
ALTER TABLE images ADD COLUMN verified boolean NOT NULL DEFAULT true;
