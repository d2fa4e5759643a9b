// English — the server's error codes (server/rc.c and a few replies made by
// hand), one sentence each. English pages show the server's own message
// instead, which names the exact subject; these stand in where it has none.
export default {
  'error.code.invalid': 'The request is not valid. Check what you entered.',
  'error.code.unauthorized': 'Not signed in: the username, the password or the session is not valid.',
  'error.code.forbidden': 'Your account may not do this.',
  'error.code.not_found': 'It was not found; it may have been deleted.',
  'error.code.method_not_allowed': 'The server does not allow this here.',
  'error.code.conflict': 'This conflicts with the current state (a name already taken, or something still in use).',
  'error.code.body_too_large': 'What was sent is too large.',
  'error.code.unsupported_media_type': 'The server does not accept this kind of content.',
  'error.code.throttled': 'Too many requests. Please wait a moment and try again.',
  'error.code.headers_too_large': 'The request’s headers are too large.',
  'error.code.uri_too_long': 'The request’s address is too long.',
  'error.code.request_timeout': 'The request took too long to arrive. Please try again.',
  'error.code.insufficient_storage': 'There is not enough storage (a quota or the disk is full).',
  'error.code.unavailable': 'The service is not available right now. Please try again later.',
  'error.code.timeout': 'The server waited too long for an answer. Please try again later.',
  'error.code.database_error': 'The database failed. Please try again later.',
  'error.code.docker_error': 'A node’s container engine failed.',
  'error.code.internal': 'The server failed (an internal error).',
  'error.code.out_of_memory': 'The server is out of memory. Please try again later.',
  'error.code.range_not_satisfiable': 'The requested part of the file does not exist.',
  'error.code.not_implemented': 'The server cannot do this (not implemented).',
  'error.code.bad_response': 'The server sent a reply that could not be read.',
  'error.code.password_change_required': 'You must choose a new password before going on.',
};
