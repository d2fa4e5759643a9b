// roles.js — the account roles, most privileged first (SPEC §2).
export const ROLE_NAMES = ['admin', 'teacher', 'researcher', 'student'];
