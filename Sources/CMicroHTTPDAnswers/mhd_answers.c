#define _GNU_SOURCE
#include "mhd_answers.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef enum MHD_Result (*queue_function) (struct MHD_Connection *, unsigned int, struct MHD_Response *);

static queue_function libmicrohttpd_queue;
static pthread_once_t found_once = PTHREAD_ONCE_INIT;
static _Atomic (mhd_answers_handler) answers_handler;

static void
find_libmicrohttpd_queue (void)
{
  // The next definition after this one in the lookup order: libmicrohttpd's.
  libmicrohttpd_queue = (queue_function) dlsym (RTLD_NEXT, "MHD_queue_response");
}

void
mhd_answers_set_handler (mhd_answers_handler handler)
{
  atomic_store (&answers_handler, handler);
}

enum MHD_Result
mhd_answers_queue (struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response)
{
  pthread_once (&found_once, find_libmicrohttpd_queue);
  if (NULL == libmicrohttpd_queue)
    return MHD_NO;
  return libmicrohttpd_queue (connection, status, response);
}

/// Interposes libmicrohttpd's own: only libmicrohttpd's built-in answers call it (MicroHTTP
/// queues through mhd_answers_queue).
enum MHD_Result
MHD_queue_response (struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response)
{
  mhd_answers_handler handler = atomic_load (&answers_handler);
  struct MHD_Response *replacement = NULL;
  if (NULL != handler && NULL != connection && NULL != response)
    replacement = handler (connection, status);
  if (NULL == replacement)
    return mhd_answers_queue (connection, status, response);
  // The connection holds its own reference once queued; libmicrohttpd's caller destroys its
  // response, which was never queued, as it would after queueing it.
  enum MHD_Result queued = mhd_answers_queue (connection, status, replacement);
  MHD_destroy_response (replacement);
  return queued;
}
