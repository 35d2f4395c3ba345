#ifndef CMICROHTTPD_OWN_ANSWERS_H
#define CMICROHTTPD_OWN_ANSWERS_H
// libmicrohttpd answers some requests itself, before any callback of the application could:
// 414 and 431 for a request line or head too large for the connection's memory pool, 400 or
// 413 for a malformed chunked body, 400 and 505 for a bad HTTP version. It has no
// option to add header fields to those answers (a browser then sees an opaque CORS failure
// instead of the status), and its bodies are HTML pages without a Content-Type.
//
// It queues each with MHD_queue_response, called through its PLT, so a definition of that
// function in the executable is the one it calls. This target has one: linked only into
// binaries that serve reactord (ReactorService depends on it, MicroHTTP does not), it passes
// every call on to libmicrohttpd's own, except, once a handler is installed, the calls made
// from inside libmicrohttpd: for those it asks the handler for an answer to send instead.
// It interposes MHD_lookup_connection_value_n too, so that libmicrohttpd does not see a
// Content-Length it cannot read (its answer to one has its head twice; MicroHTTP answers it),
// nor a Cookie field (its split of one took room in the connection's pool, and its answer to
// one it had no room to split had its head twice).
// It was written against libmicrohttpd 0.9.75 (MHD_VERSION 0x00097500); built against any
// other version it defines nothing in libmicrohttpd's place and installs no handler.
#include <microhttpd.h>

/// Called on libmicrohttpd's thread for each answer libmicrohttpd makes itself, before it is
/// sent: returns a response to send in its place (the caller queues it, then destroys this
/// reference) with the status `*status` holds then (libmicrohttpd's, unless the handler set
/// another), or NULL to send libmicrohttpd's. Must not block.
typedef struct MHD_Response *(*mhd_own_answers_handler) (struct MHD_Connection *connection,
                                                         unsigned int *status);

/// Sets the process's handler (NULL for none): 1 when libmicrohttpd's own answers will reach
/// it, 0 when this build cannot hook them (another libmicrohttpd version).
int mhd_own_answers_install (mhd_own_answers_handler handler);

#endif
