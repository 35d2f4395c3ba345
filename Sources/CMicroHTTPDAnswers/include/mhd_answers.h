#ifndef CMICROHTTPD_ANSWERS_H
#define CMICROHTTPD_ANSWERS_H
// libmicrohttpd answers some requests itself, before any callback of the application could:
// 414 and 431 for a request line or head too large for the connection's memory pool, 400 or
// 413 for a Content-Length it cannot read, 400 and 505 for a bad HTTP version. It has no
// option to add header fields to those answers (a browser then sees an opaque CORS failure
// instead of the status), and its bodies are HTML pages without a Content-Type. It queues
// each with MHD_queue_response, called through its PLT, so the definition of that function in
// mhd_answers.c, linked into the executable, is the one it calls: it asks a handler for an
// answer of the application's own to send instead, and passes that (or, when the handler
// makes none, libmicrohttpd's) on to libmicrohttpd's MHD_queue_response.
#include <microhttpd.h>

/// Called on libmicrohttpd's thread for each answer libmicrohttpd makes itself, before it is
/// sent: returns a response to send in its place with the same status (the caller queues it,
/// then destroys this reference), or NULL to send libmicrohttpd's. Must not block.
typedef struct MHD_Response *(*mhd_answers_handler) (struct MHD_Connection *connection,
                                                     unsigned int status);

/// Sets the process's handler (NULL for none).
void mhd_answers_set_handler (mhd_answers_handler handler);

/// libmicrohttpd's MHD_queue_response itself: the application's own answers, which go to
/// no handler.
enum MHD_Result mhd_answers_queue (struct MHD_Connection *connection, unsigned int status,
                                   struct MHD_Response *response);

#endif
